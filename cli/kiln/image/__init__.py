"""Node images: `kiln image build` (kiln.image.build) and the manifest beside each one."""
