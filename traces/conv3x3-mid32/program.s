.config rows=32 cols=32 spm=1048576 acc=262144
.region X r0 200704
.region Wt r1 36864
.region Y r2 802816
.sem x_full 0
.sem x_empty 2
.sem w_full 0
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/0,1:1/0} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x7800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
dma.ld shape[2,1,18,1024] dst=spm:0x75c00<i8>{18432,18432,1024,1} src=dram:Wt+0x0<i8>{18432,18432,1024,1} signal(w_full)
mxu.sync wait(x_full, w_full, acc_empty)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x0<i32>{128,0,3584} acc.row=256 a=spm:0x7800<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x0<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x340<i8>{3584,64,1} pad{0:1/0} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x3ea00<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x18800<i32>{128,0,3584} acc.row=256 a=spm:0x3ea00<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0xe00<i32>{14336,256,4} src=acc:0x18800<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x6c0<i8>{3584,64,1} pad{0:1/0} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x7800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x0<i32>{128,0,3584} acc.row=256 a=spm:0x7800<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x1c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0xa40<i8>{3584,64,1} pad{0:1/0,1:0/1} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x3ea00<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x18800<i32>{128,0,3584} acc.row=256 a=spm:0x3ea00<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x2a00<i32>{14336,256,4} src=acc:0x18800<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x17a00<i8>{3584,64,1} pad{0:0/1,1:1/0} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x7800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x0<i32>{128,0,3584} acc.row=256 a=spm:0x7800<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x62000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x17d40<i8>{3584,64,1} pad{0:0/1} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x3ea00<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x18800<i32>{128,0,3584} acc.row=256 a=spm:0x3ea00<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x62e00<i32>{14336,256,4} src=acc:0x18800<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x180c0<i8>{3584,64,1} pad{0:0/1} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x7800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x0<i32>{128,0,3584} acc.row=256 a=spm:0x7800<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x63c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[30,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x18440<i8>{3584,64,1} pad{0:0/1,1:0/1} fill=0
dma.ld shape[28,14,3,192] dst=spm:0x3ea00<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[2,18,28] m=14 k=32 n=32 acc=acc:0x18800<i32>{128,0,3584} acc.row=256 a=spm:0x3ea00<i8>{0,32,8064} a.row=576 b=spm:0x75c00<i8>{18432,1024,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[28,14,64] dst=dram:Y+0x64a00<i32>{14336,256,4} src=acc:0x18800<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
halt
