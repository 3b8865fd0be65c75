"""The layers of ``symgrad.nn``, by kind."""
from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSoftmax, ReLU, ReLU6, SiLU, Sigmoid,
                         Softmax, Softplus, Tanh)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .linear import Bilinear, Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss,
                   NLLLoss, SmoothL1Loss)
from .misc import Dropout, Embedding, Flatten, LayerNorm, Unflatten
from .module import Module

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
           "Identity", "Linear", "Bilinear", "Flatten", "Unflatten", "Dropout", "Embedding",
           "LayerNorm", "ReLU", "ReLU6", "Hardtanh", "LeakyReLU", "ELU", "GELU", "SiLU", "Tanh",
           "Sigmoid", "Softplus", "Softmax", "LogSoftmax", "MSELoss", "L1Loss", "SmoothL1Loss",
           "HuberLoss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss"]
