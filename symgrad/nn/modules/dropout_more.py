"""``Dropout1d`` / ``2d`` / ``3d``, ``AlphaDropout`` and ``FeatureAlphaDropout``: the layers
over :mod:`symgrad.nn.feature_dropout` (the identity in evaluation mode)."""
from __future__ import annotations

from .. import feature_dropout as D
from .misc import Dropout

__all__ = ["Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class Dropout1d(Dropout):
    def forward(self, input):
        return D.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    def forward(self, input):
        return D.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    def forward(self, input):
        return D.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(Dropout):
    def forward(self, input):
        return D.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    def forward(self, input):
        return D.feature_alpha_dropout(input, self.p, self.training)
