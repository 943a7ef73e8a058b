.config rows=32 cols=32 spm=1048576 acc=262144
.region X r0 200704
.region Wt r1 36864
.region Y r2 802816
.sem in_full 0
.sem in_empty 2
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[20,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/0,1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x24400<i8>{2048,1024,1} src=dram:Wt+0x0<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[18,3,3,2] m=56 k=32 n=32 acc=acc:0x0<i32>{7168,0,0,0} acc.row=128 a=spm:0x0<i8>{3712,3712,64,32} a.row=64 b=spm:0x24400<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[18,56,32] dst=dram:Y+0x0<i32>{14336,256,4} src=acc:0x0<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[20,58,64] dst=spm:0x12200<i8>{3712,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/0,1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x28c00<i8>{2048,1024,1} src=dram:Wt+0x4800<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[18,3,3,2] m=56 k=32 n=32 acc=acc:0x1f800<i32>{7168,0,0,0} acc.row=128 a=spm:0x12200<i8>{3712,3712,64,32} a.row=64 b=spm:0x28c00<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[18,56,32] dst=dram:Y+0x80<i32>{14336,256,4} src=acc:0x1f800<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[20,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0xee00<i8>{3584,64,1} pad{1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x24400<i8>{2048,1024,1} src=dram:Wt+0x0<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[18,3,3,2] m=56 k=32 n=32 acc=acc:0x0<i32>{7168,0,0,0} acc.row=128 a=spm:0x0<i8>{3712,3712,64,32} a.row=64 b=spm:0x24400<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[18,56,32] dst=dram:Y+0x3f000<i32>{14336,256,4} src=acc:0x0<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[20,58,64] dst=spm:0x12200<i8>{3712,64,1} src=dram:X+0xee00<i8>{3584,64,1} pad{1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x28c00<i8>{2048,1024,1} src=dram:Wt+0x4800<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[18,3,3,2] m=56 k=32 n=32 acc=acc:0x1f800<i32>{7168,0,0,0} acc.row=128 a=spm:0x12200<i8>{3712,3712,64,32} a.row=64 b=spm:0x28c00<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[18,56,32] dst=dram:Y+0x3f080<i32>{14336,256,4} src=acc:0x1f800<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[20,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x1ea00<i8>{3584,64,1} pad{1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x24400<i8>{2048,1024,1} src=dram:Wt+0x0<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[18,3,3,2] m=56 k=32 n=32 acc=acc:0x0<i32>{7168,0,0,0} acc.row=128 a=spm:0x0<i8>{3712,3712,64,32} a.row=64 b=spm:0x24400<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[18,56,32] dst=dram:Y+0x7e000<i32>{14336,256,4} src=acc:0x0<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[20,58,64] dst=spm:0x12200<i8>{3712,64,1} src=dram:X+0x1ea00<i8>{3584,64,1} pad{1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x28c00<i8>{2048,1024,1} src=dram:Wt+0x4800<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[18,3,3,2] m=56 k=32 n=32 acc=acc:0x1f800<i32>{7168,0,0,0} acc.row=128 a=spm:0x12200<i8>{3712,3712,64,32} a.row=64 b=spm:0x28c00<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[18,56,32] dst=dram:Y+0x7e080<i32>{14336,256,4} src=acc:0x1f800<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[4,58,64] dst=spm:0x0<i8>{3712,64,1} src=dram:X+0x2e600<i8>{3584,64,1} pad{0:0/1,1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x24400<i8>{2048,1024,1} src=dram:Wt+0x0<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[2,3,3,2] m=56 k=32 n=32 acc=acc:0x0<i32>{7168,0,0,0} acc.row=128 a=spm:0x0<i8>{3712,3712,64,32} a.row=64 b=spm:0x24400<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[2,56,32] dst=dram:Y+0xbd000<i32>{14336,256,4} src=acc:0x0<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[4,58,64] dst=spm:0x12200<i8>{3712,64,1} src=dram:X+0x2e600<i8>{3584,64,1} pad{0:0/1,1:1/1} fill=0 wait(in_empty)
dma.ld shape[9,2,1024] dst=spm:0x28c00<i8>{2048,1024,1} src=dram:Wt+0x4800<i8>{2048,1024,1} signal(in_full)
mxu.mm.z shape[2,3,3,2] m=56 k=32 n=32 acc=acc:0x1f800<i32>{7168,0,0,0} acc.row=128 a=spm:0x12200<i8>{3712,3712,64,32} a.row=64 b=spm:0x28c00<i8>{0,6144,2048,1024} wait(in_full, acc_empty) signal(in_empty, acc_full)
dma.st shape[2,56,32] dst=dram:Y+0xbd080<i32>{14336,256,4} src=acc:0x1f800<i32>{7168,128,4} wait(acc_full) signal(acc_empty)
halt
