"""One module per task: each exposes TASK_NAME, DESCRIPTION, GENERATOR_VERSION, Params, build and card_details.

The contract is spelled out and checked in :mod:`datasets_builder.registry`, where each task is registered.
"""
