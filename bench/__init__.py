"""symgrad's benchmark suite: value+gradient speed of symgrad vs its peers.

Run ``python -m bench --help``; see ``bench/README.md`` for the methodology.
Owns nothing of the ``symgrad`` package itself and imports it only through the
adapters in ``bench.systems``.
"""
