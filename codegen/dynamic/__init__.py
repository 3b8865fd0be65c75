"""Shape-generic native code: one kernel for every value of a runtime extent ``n``
(see :mod:`.executable` for the entry point, :mod:`.lower` for the lowering)."""
