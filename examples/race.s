; A double-buffered pipeline with a race: dma.ld fills two SPM slots in turn, the vector unit applies relu to each
; tile and dma.st stores the result. The ring has 2 slots, but its `empty` semaphore starts at 3, so the third load
; may overwrite slot 0 while the vector unit still reads it (and the fourth, slot 1). The simulator gives the right
; answer on most Arch settings, which is what makes races dangerous; the sanitizer finds both, whatever the timing:
;   npusim verify --races examples/race.s
; With `.sem empty 2` the k-th load waits for the (k-2)-th relu to release its slot and there is no race.
.config rows=16 cols=16 spm=262144 acc=65536
.region X r0 256
.region Y r1 256
.sem full 0
.sem empty 3
.sem done 0
dma.ld shape[64] dst=spm:0x0<i8>{1} src=dram:X+0x0<i8>{1} wait(empty) signal(full)
dma.ld shape[64] dst=spm:0x40<i8>{1} src=dram:X+0x40<i8>{1} wait(empty) signal(full)
vpu.act.relu shape[64] dst=spm:0x100<i8>{1} src=spm:0x0<i8>{1} wait(full) signal(empty, done)
dma.st shape[64] dst=dram:Y+0x0<i8>{1} src=spm:0x100<i8>{1} wait(done)
dma.ld shape[64] dst=spm:0x0<i8>{1} src=dram:X+0x80<i8>{1} wait(empty) signal(full)
vpu.act.relu shape[64] dst=spm:0x140<i8>{1} src=spm:0x40<i8>{1} wait(full) signal(empty, done)
dma.st shape[64] dst=dram:Y+0x40<i8>{1} src=spm:0x140<i8>{1} wait(done)
dma.ld shape[64] dst=spm:0x40<i8>{1} src=dram:X+0xc0<i8>{1} wait(empty) signal(full)
vpu.act.relu shape[64] dst=spm:0x180<i8>{1} src=spm:0x0<i8>{1} wait(full) signal(empty, done)
dma.st shape[64] dst=dram:Y+0x80<i8>{1} src=spm:0x180<i8>{1} wait(done)
vpu.act.relu shape[64] dst=spm:0x1c0<i8>{1} src=spm:0x40<i8>{1} wait(full) signal(empty, done)
dma.st shape[64] dst=dram:Y+0xc0<i8>{1} src=spm:0x1c0<i8>{1} wait(done)
halt
