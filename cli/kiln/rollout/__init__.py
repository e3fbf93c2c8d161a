"""`kiln rollout`'s parts beside its campaign: its options and plan (which nodes, in
which batches, which reboot), the checks of each wait, its resumable record, the batch
state machine (`batch`) and the record as the report's parts (`summary`). The campaign
that runs the service hosts and drives each batch is kiln.campaigns.rollout."""
