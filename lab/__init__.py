"""Virtual lossless fabric: netns runtime and the lab.vswitch software switch."""
