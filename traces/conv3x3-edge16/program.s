.config rows=16 cols=16 spm=262144 acc=65536
.region X r0 200704
.region Wt r1 36864
.region Y r2 802816
.sem x_full 0
.sem x_empty 2
.sem w_full 0
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/0,1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
dma.ld shape[4,1,36,256] dst=spm:0x22000<i8>{9216,9216,256,1} src=dram:Wt+0x0<i8>{9216,9216,256,1} signal(w_full)
mxu.sync wait(x_full, w_full, acc_empty)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x0<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x340<i8>{3584,64,1} pad{0:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0xe00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x6c0<i8>{3584,64,1} pad{0:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x1c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0xa40<i8>{3584,64,1} pad{0:1/0,1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x2a00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x6200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x1c000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x6540<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x1ce00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x68c0<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x1dc00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x6c40<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x1ea00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0xd200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x38000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0xd540<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x38e00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0xd8c0<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x39c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0xdc40<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x3aa00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x14200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x54000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x14540<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x54e00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x148c0<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x55c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x14c40<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x56a00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x1b200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x70000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x1b540<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x70e00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x1b8c0<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x71c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x1bc40<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x72a00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x22200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x8c000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x22540<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x8ce00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x228c0<i8>{3584,64,1}
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x8dc00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x22c40<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0x8ea00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x29200<i8>{3584,64,1} pad{0:0/1,1:1/0} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0xa8000<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x29540<i8>{3584,64,1} pad{0:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0xa8e00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x298c0<i8>{3584,64,1} pad{0:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x2800<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x0<i32>{64,0,3584} acc.row=256 a=spm:0x2800<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0xa9c00<i32>{14336,256,4} src=acc:0x0<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,16,64] dst=spm:0x0<i8>{1024,64,1} src=dram:X+0x29c40<i8>{3584,64,1} pad{0:0/1,1:0/1} fill=0
dma.ld shape[8,14,3,192] dst=spm:0x12400<i8>{8064,576,192,1} src=spm:0x0<i8>{1024,64,1024,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,8] m=14 k=16 n=16 acc=acc:0x7000<i32>{64,0,3584} acc.row=256 a=spm:0x12400<i8>{0,16,8064} a.row=576 b=spm:0x22000<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[8,14,64] dst=dram:Y+0xaaa00<i32>{14336,256,4} src=acc:0x7000<i32>{3584,256,4} wait(acc_full) signal(acc_empty)
halt
