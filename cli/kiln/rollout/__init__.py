"""`kiln rollout`'s pure parts: its options, its plan (which nodes, in which batches,
which reboot), the checks of each wait, and its resumable record. The flow that runs
the batches is a campaign: kiln.campaigns.rollout."""
