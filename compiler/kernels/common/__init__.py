"""What the program generators share: the target, the ring pipeline, epilogues, halo loads, blocks and matrix loop
nests, the sinks they emit into (a program, or its estimate) and the one tiling search."""
