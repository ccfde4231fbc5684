"""acrl.compiler: spec -> bundle, pure. Never imports ray, boto3, torch or acrl.runtime."""
