"""Cross-encoders over a query's candidate list: point-wise (mono), MatRank's matrix, the Set-Encoder."""
