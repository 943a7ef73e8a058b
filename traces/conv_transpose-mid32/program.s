.config rows=32 cols=32 spm=1048576 acc=262144
.region X r0 320000
.region Wt r1 589824
.region Y r2 1280000
.sem x_full 0
.sem x_empty 2
.sem w_full 0
.sem acc_full 0
.sem acc_empty 2
dma.ld shape[1,9,4,1024] dst=spm:0x43800<f32>{147456,16384,4096,4} src=dram:Wt+0x0<f32>{147456,16384,4096,4} signal(w_full)
dma.ld shape[10,27,128] dst=spm:0x0<f32>{13824,512,4} src=dram:X+0x0<f32>{12800,512,4} pad{0:1/0,1:1/1} fill=0.0 wait(x_empty) signal(x_full)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x0<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0x43800<f32>{32768,16384,4096,0} wait(x_full, w_full, acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x80<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0x53800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1a00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0x5b800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1a80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0x63800<f32>{4096,0} signal(acc_full)
dma.st shape[17,50,32] dst=dram:Y+0x0<f32>{25600,512,4} src=acc:0x1a80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[1,9,4,1024] dst=spm:0x67800<f32>{147456,16384,4096,4} src=dram:Wt+0x24000<f32>{147456,16384,4096,4} signal(w_full)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x1d400<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0x67800<f32>{32768,16384,4096,0} wait(w_full, acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1d480<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0x77800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1ee00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0x7f800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1ee80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0x87800<f32>{4096,0} signal(acc_full)
dma.st shape[17,50,32] dst=dram:Y+0x80<f32>{25600,512,4} src=acc:0x1ee80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[1,9,4,1024] dst=spm:0x8b800<f32>{147456,16384,4096,4} src=dram:Wt+0x48000<f32>{147456,16384,4096,4} signal(w_full)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x0<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0x8b800<f32>{32768,16384,4096,0} wait(w_full, acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x80<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0x9b800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1a00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0xa3800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1a80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0xab800<f32>{4096,0} signal(acc_full)
dma.st shape[17,50,32] dst=dram:Y+0x100<f32>{25600,512,4} src=acc:0x1a80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[1,9,4,1024] dst=spm:0xaf800<f32>{147456,16384,4096,4} src=dram:Wt+0x6c000<f32>{147456,16384,4096,4} signal(w_full)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x1d400<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0xaf800<f32>{32768,16384,4096,0} wait(w_full, acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1d480<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0xbf800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1ee00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0xc7800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1ee80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0xcf800<f32>{4096,0} signal(x_empty, acc_full)
dma.st shape[17,50,32] dst=dram:Y+0x180<f32>{25600,512,4} src=acc:0x1ee80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[10,27,128] dst=spm:0x21c00<f32>{13824,512,4} src=dram:X+0x19000<f32>{12800,512,4} pad{1:1/1} fill=0.0 wait(x_empty) signal(x_full)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x0<f32>{0,0,0,13312} acc.row=256 a=spm:0x21c00<f32>{13824,512,128,13824} a.row=512 b=spm:0x43800<f32>{32768,16384,4096,0} wait(x_full, acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x80<f32>{0,0,13312} acc.row=256 a=spm:0x21e00<f32>{13824,128,13824} a.row=512 b=spm:0x53800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1a00<f32>{0,0,13312} acc.row=256 a=spm:0x25200<f32>{512,128,13824} a.row=512 b=spm:0x5b800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1a80<f32>{0,13312} acc.row=256 a=spm:0x25400<f32>{128,13824} a.row=512 b=spm:0x63800<f32>{4096,0} signal(acc_full)
dma.st shape[18,50,32] dst=dram:Y+0x6a400<f32>{25600,512,4} src=acc:0x80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x1d400<f32>{0,0,0,13312} acc.row=256 a=spm:0x21c00<f32>{13824,512,128,13824} a.row=512 b=spm:0x67800<f32>{32768,16384,4096,0} wait(acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1d480<f32>{0,0,13312} acc.row=256 a=spm:0x21e00<f32>{13824,128,13824} a.row=512 b=spm:0x77800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1ee00<f32>{0,0,13312} acc.row=256 a=spm:0x25200<f32>{512,128,13824} a.row=512 b=spm:0x7f800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1ee80<f32>{0,13312} acc.row=256 a=spm:0x25400<f32>{128,13824} a.row=512 b=spm:0x87800<f32>{4096,0} signal(acc_full)
dma.st shape[18,50,32] dst=dram:Y+0x6a480<f32>{25600,512,4} src=acc:0x1d480<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x0<f32>{0,0,0,13312} acc.row=256 a=spm:0x21c00<f32>{13824,512,128,13824} a.row=512 b=spm:0x8b800<f32>{32768,16384,4096,0} wait(acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x80<f32>{0,0,13312} acc.row=256 a=spm:0x21e00<f32>{13824,128,13824} a.row=512 b=spm:0x9b800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1a00<f32>{0,0,13312} acc.row=256 a=spm:0x25200<f32>{512,128,13824} a.row=512 b=spm:0xa3800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1a80<f32>{0,13312} acc.row=256 a=spm:0x25400<f32>{128,13824} a.row=512 b=spm:0xab800<f32>{4096,0} signal(acc_full)
dma.st shape[18,50,32] dst=dram:Y+0x6a500<f32>{25600,512,4} src=acc:0x80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[2,2,4,9] m=26 k=32 n=32 acc=acc:0x1d400<f32>{0,0,0,13312} acc.row=256 a=spm:0x21c00<f32>{13824,512,128,13824} a.row=512 b=spm:0xaf800<f32>{32768,16384,4096,0} wait(acc_empty)
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1d480<f32>{0,0,13312} acc.row=256 a=spm:0x21e00<f32>{13824,128,13824} a.row=512 b=spm:0xbf800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,9] m=26 k=32 n=32 acc=acc:0x1ee00<f32>{0,0,13312} acc.row=256 a=spm:0x25200<f32>{512,128,13824} a.row=512 b=spm:0xc7800<f32>{16384,4096,0}
mxu.mm.z shape[4,9] m=26 k=32 n=32 acc=acc:0x1ee80<f32>{0,13312} acc.row=256 a=spm:0x25400<f32>{128,13824} a.row=512 b=spm:0xcf800<f32>{4096,0} signal(x_empty, acc_full)
dma.st shape[18,50,32] dst=dram:Y+0x6a580<f32>{25600,512,4} src=acc:0x1d480<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
dma.ld shape[9,27,128] dst=spm:0x0<f32>{13824,512,4} src=dram:X+0x35200<f32>{12800,512,4} pad{0:0/1,1:1/1} fill=0.0 wait(x_empty) signal(x_full)
mxu.mm.z shape[2,2,4,8] m=26 k=32 n=32 acc=acc:0x0<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0x43800<f32>{32768,16384,4096,0} wait(x_full, acc_empty)
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x80<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0x53800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x1a00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0x5b800<f32>{16384,4096,0}
mxu.mm.z shape[4,8] m=26 k=32 n=32 acc=acc:0x1a80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0x63800<f32>{4096,0} signal(acc_full)
dma.st shape[15,50,32] dst=dram:Y+0xdac00<f32>{25600,512,4} src=acc:0x80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[2,2,4,8] m=26 k=32 n=32 acc=acc:0x1d400<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0x67800<f32>{32768,16384,4096,0} wait(acc_empty)
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x1d480<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0x77800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x1ee00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0x7f800<f32>{16384,4096,0}
mxu.mm.z shape[4,8] m=26 k=32 n=32 acc=acc:0x1ee80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0x87800<f32>{4096,0} signal(acc_full)
dma.st shape[15,50,32] dst=dram:Y+0xdac80<f32>{25600,512,4} src=acc:0x1d480<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[2,2,4,8] m=26 k=32 n=32 acc=acc:0x0<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0x8b800<f32>{32768,16384,4096,0} wait(acc_empty)
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x80<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0x9b800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x1a00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0xa3800<f32>{16384,4096,0}
mxu.mm.z shape[4,8] m=26 k=32 n=32 acc=acc:0x1a80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0xab800<f32>{4096,0} signal(acc_full)
dma.st shape[15,50,32] dst=dram:Y+0xdad00<f32>{25600,512,4} src=acc:0x80<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
mxu.mm.z shape[2,2,4,8] m=26 k=32 n=32 acc=acc:0x1d400<f32>{0,0,0,13312} acc.row=256 a=spm:0x0<f32>{13824,512,128,13824} a.row=512 b=spm:0xaf800<f32>{32768,16384,4096,0} wait(acc_empty)
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x1d480<f32>{0,0,13312} acc.row=256 a=spm:0x200<f32>{13824,128,13824} a.row=512 b=spm:0xbf800<f32>{16384,4096,0}
mxu.mm.z shape[2,4,8] m=26 k=32 n=32 acc=acc:0x1ee00<f32>{0,0,13312} acc.row=256 a=spm:0x3600<f32>{512,128,13824} a.row=512 b=spm:0xc7800<f32>{16384,4096,0}
mxu.mm.z shape[4,8] m=26 k=32 n=32 acc=acc:0x1ee80<f32>{0,13312} acc.row=256 a=spm:0x3800<f32>{128,13824} a.row=512 b=spm:0xcf800<f32>{4096,0} signal(x_empty, acc_full)
dma.st shape[15,50,32] dst=dram:Y+0xdad80<f32>{25600,512,4} src=acc:0x1d480<f32>{6656,128,4} wait(acc_full) signal(acc_empty)
halt
