"""Offline evaluation of a registered pair version on a governed eval set
(`specroute engine evaluate`): acceptance per draft position, mean acceptance
length, closed-form expected speedup per depth, per-label slices and draft
perplexity, posted to control as an offline evaluation."""
