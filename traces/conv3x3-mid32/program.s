.config rows=32 cols=32 spm=1048576 acc=262144
.region X r0 200704
.region Wt r1 36864
.region Y r2 802816
.sem x_full 0
.sem x_empty 2
.sem w_full 0
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[1,9,2,1024] dst=spm:0x1d000<i8>{18432,2048,1024,1} src=dram:Wt+0x0<i8>{18432,2048,1024,1} signal(w_full)
dma.ld shape[58,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/1,1:1/0} fill=0 wait(x_empty) signal(x_full)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x0<i32>{0,0,0,1792} acc.row=128 a=spm:0x0<i8>{1024,64,32,1024} a.row=64 b=spm:0x1d000<i8>{6144,2048,1024,0} wait(x_full, w_full, acc_empty) signal(acc_full)
dma.st shape[56,14,32] dst=dram:Y+0x0<i32>{14336,256,4} src=acc:0x0<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[1,9,2,1024] dst=spm:0x21800<i8>{18432,2048,1024,1} src=dram:Wt+0x4800<i8>{18432,2048,1024,1} signal(w_full)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x18800<i32>{0,0,0,1792} acc.row=128 a=spm:0x0<i8>{1024,64,32,1024} a.row=64 b=spm:0x21800<i8>{6144,2048,1024,0} wait(w_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[56,14,32] dst=dram:Y+0x80<i32>{14336,256,4} src=acc:0x18800<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[58,16,64] dst=spm:0xe800<i8>{1024,64,1} src=dram:X+0x340<i8>{3584,64,1} pad{0:1/1} fill=0 wait(x_empty) signal(x_full)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x0<i32>{0,0,0,1792} acc.row=128 a=spm:0xe800<i8>{1024,64,32,1024} a.row=64 b=spm:0x1d000<i8>{6144,2048,1024,0} wait(x_full, acc_empty) signal(acc_full)
dma.st shape[56,14,32] dst=dram:Y+0xe00<i32>{14336,256,4} src=acc:0x0<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x18800<i32>{0,0,0,1792} acc.row=128 a=spm:0xe800<i8>{1024,64,32,1024} a.row=64 b=spm:0x21800<i8>{6144,2048,1024,0} wait(acc_empty) signal(x_empty, acc_full)
dma.st shape[56,14,32] dst=dram:Y+0xe80<i32>{14336,256,4} src=acc:0x18800<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[58,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x6c0<i8>{3584,64,1} pad{0:1/1} fill=0 wait(x_empty) signal(x_full)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x0<i32>{0,0,0,1792} acc.row=128 a=spm:0x0<i8>{1024,64,32,1024} a.row=64 b=spm:0x1d000<i8>{6144,2048,1024,0} wait(x_full, acc_empty) signal(acc_full)
dma.st shape[56,14,32] dst=dram:Y+0x1c00<i32>{14336,256,4} src=acc:0x0<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x18800<i32>{0,0,0,1792} acc.row=128 a=spm:0x0<i8>{1024,64,32,1024} a.row=64 b=spm:0x21800<i8>{6144,2048,1024,0} wait(acc_empty) signal(x_empty, acc_full)
dma.st shape[56,14,32] dst=dram:Y+0x1c80<i32>{14336,256,4} src=acc:0x18800<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[58,16,64] dst=spm:0xe800<i8>{1024,64,1} src=dram:X+0xa40<i8>{3584,64,1} pad{0:1/1,1:0/1} fill=0 wait(x_empty) signal(x_full)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x0<i32>{0,0,0,1792} acc.row=128 a=spm:0xe800<i8>{1024,64,32,1024} a.row=64 b=spm:0x1d000<i8>{6144,2048,1024,0} wait(x_full, acc_empty) signal(acc_full)
dma.st shape[56,14,32] dst=dram:Y+0x2a00<i32>{14336,256,4} src=acc:0x0<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[3,3,2,56] m=14 k=32 n=32 acc=acc:0x18800<i32>{0,0,0,1792} acc.row=128 a=spm:0xe800<i8>{1024,64,32,1024} a.row=64 b=spm:0x21800<i8>{6144,2048,1024,0} wait(acc_empty) signal(x_empty, acc_full)
dma.st shape[56,14,32] dst=dram:Y+0x2a80<i32>{14336,256,4} src=acc:0x18800<i32>{1792,128,4} wait(acc_full) signal(acc_empty)
halt
