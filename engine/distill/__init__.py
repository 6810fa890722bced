"""`specroute engine distill`: a draft for any Hugging Face causal-LM target directory."""
