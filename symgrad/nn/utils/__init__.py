"""``nn.utils``: gradient clipping, flat parameter vectors and ``rnn`` (packed sequences)."""
from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector",
           "vector_to_parameters"]
