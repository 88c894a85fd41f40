"""GR00T N1.6 model plugin (``groot_n1_6``, ``groot_n1_6_tiny``); see README.md."""
