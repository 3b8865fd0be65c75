"""The symbolic expression DAG: hash-consed nodes, traversal, the numpy interpreter and
symbolic reverse mode."""
