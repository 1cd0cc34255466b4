// SPDX-License-Identifier: GPL-2.0
/*
 * Where the locks the verdict names sit, for the kernel being built (guest-tests images,
 * gt-images/src/kernel/offsets.rs): compiled to assembly with Kbuild's flags for block/blk-mq.o, never
 * linked. Each VB_OFFSET leaves a "->NAME VALUE" marker in the assembly, as the kernel's own
 * asm-offsets do. The guest agent reads the figures to tell which contended lock address is
 * the disk's queue_lock: the address of the request queue (from a kprobe on
 * blk_mq_start_request, which gets the request) plus the field's offset.
 */
#include <linux/blkdev.h>
#include <linux/blk-mq.h>

#define VB_OFFSET(sym, val) asm volatile("\n.ascii \"->" #sym " %0\"" : : "i" (val))

void vb_lock_offsets(void);

void vb_lock_offsets(void)
{
	VB_OFFSET(request.q, offsetof(struct request, q));
	VB_OFFSET(request_queue.size, sizeof(struct request_queue));
	VB_OFFSET(request_queue.queue_lock, offsetof(struct request_queue, queue_lock));
	VB_OFFSET(request_queue.requeue_lock, offsetof(struct request_queue, requeue_lock));
}
