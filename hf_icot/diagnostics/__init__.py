"""Learning-dynamics measurements as ``TrainerCallback``s, usable on any ICoT run."""
