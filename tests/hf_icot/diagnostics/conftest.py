import pytest
import torch

from tests.hf_icot.diagnostics.study import study_examples, tiny_gpt2, train


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: more threads only add overhead on a shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def trained():
    """A tiny GPT-2 trained to solve the 4-base, K=2 study task (so it reads z); tests must not change it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    model = train(tiny_gpt2(seed=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), study_examples(4, 2), 200)
    torch.set_num_threads(previous)
    return model
