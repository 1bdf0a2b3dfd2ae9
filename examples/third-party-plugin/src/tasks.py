import json
import os


def thread_settings():
    """What a task sees of the plugin: the env, the file its bootstrap op wrote, PyTorch's setting."""
    recorded = None
    if os.path.exists("threads.json"):  # written by the plugin's bootstrap op, in the working directory
        with open("threads.json") as handle:
            recorded = json.load(handle)
    try:
        import torch

        torch_threads = torch.get_num_threads()
    except ImportError:
        torch_threads = None
    return {
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "mkl": os.environ.get("MKL_NUM_THREADS"),
        "recorded": recorded,
        "torch": torch_threads,
    }
