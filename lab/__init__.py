"""Virtual lossless fabric: netns runtime and the lab.vswitch software switch."""

# Before any compiled module of the package is imported: source or compiled (lossless.compiled).
import lossless.compiled  # noqa: F401 -- imported for its effect: the compiled-or-source decision
