"""One module per task: each exposes TASK_NAME, DESCRIPTION, GENERATOR_VERSION, Params, build and card_details."""
