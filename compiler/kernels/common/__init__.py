"""What the program generators share: the target, the ring pipeline, epilogues, halo loads."""
