"""Machine translation (mukhoti2020 §5.2): token-level calibration under teacher forcing, beam
search at a temperature, and BLEU."""
