.config rows=16 cols=16 spm=262144 acc=65536
.region X r0 200704
.region Wt r1 36864
.region Y r2 802816
.sem x_full 0
.sem x_empty 2
.sem w_full 0
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x0<i8>{3584,64,1} pad{0:1/0,1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
dma.ld shape[4,1,36,256] dst=spm:0x22500<i8>{9216,9216,256,1} src=dram:Wt+0x0<i8>{9216,9216,256,1} signal(w_full)
mxu.sync wait(x_full, w_full, acc_empty)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x0<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x6c0<i8>{3584,64,1} pad{0:1/0,1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x1c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x2a00<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0xe000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x30c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0xfc00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x6200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x1c000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x68c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x1dc00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x9a00<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x2a000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0xa0c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x2bc00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0xd200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x38000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0xd8c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x39c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x10a00<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x46000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x110c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x47c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x14200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x54000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x148c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x55c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x17a00<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x62000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x180c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x63c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x1b200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x70000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x1b8c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x71c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x1ea00<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x7e000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x1f0c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x7fc00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x22200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x8c000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x228c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x8dc00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x25a00<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x9a000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x260c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0x9bc00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x29200<i8>{3584,64,1} pad{1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0xa8000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x298c0<i8>{3584,64,1} pad{1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0xa9c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x2ca00<i8>{3584,64,1} pad{0:0/1,1:1/0} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x2d00<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x0<i32>{64,0,7168} acc.row=256 a=spm:0x2d00<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0xb6000<i32>{14336,256,4} src=acc:0x0<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
dma.ld shape[6,30,64] dst=spm:0x0<i8>{1920,64,1} src=dram:X+0x2d0c0<i8>{3584,64,1} pad{0:0/1,1:0/1} fill=0
dma.ld shape[4,28,3,192] dst=spm:0x12900<i8>{16128,576,192,1} src=spm:0x0<i8>{1920,64,1920,1} wait(x_empty) signal(x_full)
mxu.mm.z shape[4,36,4] m=28 k=16 n=16 acc=acc:0x7000<i32>{64,0,7168} acc.row=256 a=spm:0x12900<i8>{0,16,16128} a.row=576 b=spm:0x22500<i8>{9216,256,0} wait(x_full, acc_empty) signal(x_empty, acc_full)
dma.st shape[4,28,64] dst=dram:Y+0xb7c00<i32>{14336,256,4} src=acc:0x7000<i32>{7168,256,4} wait(acc_full) signal(acc_empty)
halt
