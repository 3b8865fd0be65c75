"""The layers of ``symgrad.nn``, by kind."""
from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSoftmax, ReLU, ReLU6, RReLU, SiLU,
                         Sigmoid, Softmax, Softplus, Tanh)
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Bilinear, Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss,
                   NLLLoss, SmoothL1Loss)
from .misc import Dropout, Embedding, Flatten, LayerNorm, Unflatten
from .module import Module
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                      ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d,
                      ZeroPad2d, ZeroPad3d)
from .activation_more import (CELU, GLU, SELU, CosineSimilarity, Hardshrink, Hardsigmoid,
                              Hardswish, KLDivLoss, LogSigmoid, Mish, PairwiseDistance,
                              Softmin, Softshrink, Softsign, Tanhshrink, Threshold)
from .grouping import GroupNorm, PixelShuffle, PixelUnshuffle
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                      AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                      MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool2d)
from .attention import MultiheadAttention, NonDynamicallyQuantizableLinear
from .rnn import GRU, LSTM, RNN, RNNBase
from .rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict", "Identity", "Linear", "Bilinear", "Flatten", "Unflatten",
           "Dropout", "Embedding", "LayerNorm", "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d",
           "AvgPool1d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "ReLU", "ReLU6", "Hardtanh",
           "LeakyReLU", "ELU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softplus", "Softmax",
           "LogSoftmax", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "CrossEntropyLoss",
           "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
           "ConvTranspose1d", "ConvTranspose2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Conv3d", "ConvTranspose3d", "BatchNorm3d",
           "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "RReLU",
           "MaxUnpool2d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
           "LogSigmoid", "SELU", "CELU", "Mish", "Hardswish", "Hardsigmoid", "Softsign",
           "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "GLU", "Softmin",
           "CosineSimilarity", "PairwiseDistance", "KLDivLoss", "GroupNorm", "PixelShuffle",
           "PixelUnshuffle",
           "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
from .loss_more import (CosineEmbeddingLoss, CTCLoss, GaussianNLLLoss,  # noqa: E402
                        HingeEmbeddingLoss, MarginRankingLoss, MultiLabelMarginLoss,
                        MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss,
                        SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)

__all__ += ["CosineEmbeddingLoss", "CTCLoss", "GaussianNLLLoss", "HingeEmbeddingLoss",
            "MarginRankingLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
            "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
            "TripletMarginWithDistanceLoss"]
from .norm_more import (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,  # noqa: E402
                        LocalResponseNorm, RMSNorm)
from .dropout_more import (AlphaDropout, Dropout1d, Dropout2d, Dropout3d,  # noqa: E402
                           FeatureAlphaDropout)
from .layers_more import ChannelShuffle, Fold, PReLU, Softmax2d, Unfold  # noqa: E402

__all__ += ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "RMSNorm",
            "AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout",
            "ChannelShuffle", "Fold", "PReLU", "Softmax2d", "Unfold"]
from .lazy import LazyLinear  # noqa: E402

__all__ += ["LazyLinear"]

__all__ += ["MultiheadAttention", "NonDynamicallyQuantizableLinear", "Transformer",
            "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
            "TransformerDecoderLayer"]
from .embedding_bag import EmbeddingBag  # noqa: E402

__all__ += ["EmbeddingBag"]
