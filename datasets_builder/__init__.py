"""Task dataset generators and their publishing to the Hugging Face Hub."""
