; A deliberately deadlocking program: the matrix unit waits for the vector unit and the vector unit for the matrix
; unit. The semaphores are balanced (one wait, one signal each), so only the cycle of waits is wrong; the static
; scan warns and the simulator reports the blocked queues instead of hanging.
;   npusim simulate examples/deadlock.s
.config rows=16 cols=16 spm=262144 acc=65536
.sem mxu_done 0
.sem vpu_done 0
mxu.sync wait(vpu_done) signal(mxu_done)
vpu.sync wait(mxu_done) signal(vpu_done)
halt
