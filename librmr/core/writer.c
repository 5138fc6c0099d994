/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writer fencing: one writer at a time per pool.
 *
 * Each member keeps a writer epoch and the incarnation of the client that
 * holds it (the holder), durably, in the activity log record. A client that
 * opens sends epoch 0: the member grants epoch+1 unless a session of the
 * holder is attached (-EBUSY: a second writer). A takeover grants
 * max(epoch, asked)+1 whatever the holder does. A client that reconnects
 * sends the epoch it holds: a higher one than the member's is adopted (it
 * was granted elsewhere while this member was away), and so is an equal one
 * whose holder here never wrote and is gone (two opens took the same number
 * from different members); an equal or lower one from anyone else is
 * refused (-ESTALE: the writer was fenced). The old writer's sessions stay up: each
 * of its requests is refused with -ESTALE before it touches anything, which
 * tells it that it was fenced. Its requests already in the store land
 * before the new writer hears its hello answer.
 *
 * The remaining window: a member that neither the new writer nor any peer
 * reaches still accepts the old writer's writes. Those writes land in its
 * activity log, which belongs to a writer that is not the holder: when the
 * member comes back, it takes the maps and copies those ranges from a peer.
 */
#include <errno.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "server_internal.h"

int writer_admit(struct srv_pool *p, const struct rmr_hello *h, uint64_t *granted)
{
	struct activity_log *al = p->al;
	uint64_t old_holder = al->holder, old_epoch = al->writer_epoch;
	const char *how;
	int ret;

	if (h->incarnation == al->holder) {
		/* The holder reconnects; it may know a higher epoch from elsewhere. */
		*granted = al->writer_epoch = RMR_MAX(al->writer_epoch, h->writer_epoch);
		return al->writer_epoch == old_epoch ? 0 : pool_al_save(p);
	}
	if (h->flags & RMR_HELLO_TAKEOVER) {
		al->writer_epoch = RMR_MAX(al->writer_epoch, h->writer_epoch) + 1;
		how = "took the pool over";
	} else if (h->writer_epoch == 0) {
		if (server_writer_attached(p, al->holder)) {
			log_warn("pool=%s member=%u: refusing a second writer %016llx: writer %016llx holds epoch %llu",
				 p->name, p->params.member_id, (unsigned long long)h->incarnation,
				 (unsigned long long)al->holder,
				 (unsigned long long)al->writer_epoch);
			return -EBUSY;
		}
		al->writer_epoch++;
		how = "opened the pool";
	} else if (h->writer_epoch > al->writer_epoch) {
		al->writer_epoch = h->writer_epoch;
		how = "holds a newer epoch";
	} else if (h->writer_epoch == al->writer_epoch && al->writer != al->holder &&
		   !server_writer_attached(p, al->holder)) {
		/*
		 * Two opens took the same epoch number from different members
		 * (one failed to open, and left without a goodbye that reached
		 * here): the holder never wrote here and is gone, so nothing of
		 * it is to fence.
		 */
		how = "holds the same epoch as a writer that left it unused";
	} else {
		p->fenced++;
		log_warn("pool=%s member=%u: refusing writer %016llx: its epoch %llu is not newer than %llu of writer %016llx",
			 p->name, p->params.member_id, (unsigned long long)h->incarnation,
			 (unsigned long long)h->writer_epoch, (unsigned long long)al->writer_epoch,
			 (unsigned long long)al->holder);
		return -ESTALE;
	}
	al->holder = h->incarnation;
	ret = pool_al_save(p);
	if (ret < 0) {
		al->holder = old_holder;
		al->writer_epoch = old_epoch;
		return ret;
	}
	/*
	 * An open gives the epoch back if it fails without writing here
	 * (writer_goodbye), also one adopted from another member's grant (the
	 * order the members answer in decides which grants and which
	 * adopts); a takeover never does.
	 */
	p->prev_holder = !(h->flags & RMR_HELLO_TAKEOVER) ? old_holder : 0;
	p->prev_epoch = old_epoch;
	log_notice("pool=%s member=%u: writer %016llx %s: writer epoch %llu", p->name,
		   p->params.member_id, (unsigned long long)h->incarnation, how,
		   (unsigned long long)al->writer_epoch);
	*granted = al->writer_epoch;
	return 0;
}

bool writer_holds(const struct srv_pool *p, const struct srv_session *sess)
{
	return sess->incarnation == p->al->holder;
}

bool writer_fenced_in_store(const struct srv_pool *p)
{
	for (const struct srv_session *x = p->srv->sessions; x; x = x->next)
		if (x->pool == p && x->role == RMR_ROLE_CLIENT && x->in_store &&
		    x->incarnation != p->al->holder)
			return true;
	return false;
}

void writer_goodbye(struct srv_pool *p, const struct srv_session *sess, int status)
{
	struct activity_log *al = p->al;

	/*
	 * A writer whose open failed (@status < 0: refused by another member,
	 * or it could not show the members it heard from hold every write)
	 * and that did not write here gives the epoch back to the one before:
	 * a refused second writer never fences the first, and the next writer
	 * that opens elsewhere meanwhile is not refused here for an epoch
	 * number that the one that left took. One that opened keeps it, even
	 * if it wrote only elsewhere: the epoch is how the writer before it
	 * learns that somebody wrote since its clean close (last_close).
	 */
	if (status >= 0 || sess->incarnation != al->holder || al->writer == al->holder ||
	    !p->prev_holder)
		return;
	al->holder = p->prev_holder;
	al->writer_epoch = p->prev_epoch;
	p->prev_holder = 0;
	if (pool_al_save(p) == 0)
		log_info("pool=%s member=%u: writer %016llx left unused; writer %016llx holds epoch %llu again",
			 p->name, p->params.member_id, (unsigned long long)sess->incarnation,
			 (unsigned long long)al->holder, (unsigned long long)al->writer_epoch);
}
