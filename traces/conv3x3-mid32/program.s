.config rows=32 cols=32 spm=1048576 acc=262144
.region X r0 200704
.region Wt r1 36864
.region Y r2 802816
.sem x_full 0
.sem x_empty 2
.sem w_full 0
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/0,1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
dma.ld shape[2,1,18,1024] dst=spm:0x44700<i8>{18432,18432,1024,1} src=dram:Wt+0x0<i8>{18432,18432,1024,1} signal(w_full)
mxu.sync wait(x_full, w_full, acc_empty)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x0<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x2a00<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0xe000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x6200<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x1c000<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x9a00<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x2a000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0xd200<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x38000<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x10a00<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x46000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x14200<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x54000<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x17a00<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x62000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x1b200<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x70000<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x1ea00<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x7e000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x22200<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x8c000<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x25a00<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0x9a000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x29200<i8>{3584,64,1} pad{1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x5700<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0x0<i32>{128,0,14336} acc.row=256 a=spm:0x5700<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0xa8000<i32>{14336,256,4} src=acc:0x0<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x2ca00<i8>{3584,64,1} pad{0:0/1,1:1/1} fill=0
dma.ld shape[4,56,3,192] dst=spm:0x24f00<i8>{32256,576,192,1} src=spm:0x0<i8>{3712,64,3712,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,4] m=56 k=32 n=32 acc=acc:0xe000<i32>{128,0,14336} acc.row=256 a=spm:0x24f00<i8>{0,32,32256} a.row=576 b=spm:0x44700<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,56,64] dst=dram:Y+0xb6000<i32>{14336,256,4} src=acc:0xe000<i32>{14336,256,4} wait(acc_full) signal(acc_empty)
halt
