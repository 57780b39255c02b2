"""The names of the files a run folder holds besides its model and tokenizer: written by the trainer and the recipes,
published with the model, read by the results scripts. One name per record."""

#: The final evaluation (``<split>/<mode>/<metric>`` -> value), also the card's model-index.
EVAL_RESULTS_FILE = "eval_results.json"
#: The trainer's ``log_history``: every logged step (loss, learning rate, curriculum, evaluations).
TRAINING_LOG_FILE = "training_log.json"
#: The loss curves with the stage boundaries marked.
CURVES_FILE = "training_curves.png"
#: The model card.
CARD_FILE = "README.md"
#: The curriculum's stages over the run (``Schedule.describe``).
STAGES_FILE = "stages.json"
#: Beside a saved model: the schedule (and, in a stage folder, the stage, its last step, what it removes, metrics).
SCHEDULE_FILE = "icot_schedule.json"
