"""Traffic segments: selectors over normalized request features, by priority."""
