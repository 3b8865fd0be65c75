"""Primitives: the registry and its tables (registry), elementwise formulas (formulas),
structural primitives (structural), VJP rules (vjp), the compiler's fused kernel (fused),
unnamed primitive calls used by rules (lax) and shape arithmetic (shapes)."""
