package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaders records which electors lead now and which ever led.
type leaders struct {
	mu      sync.Mutex
	leading map[string]bool
	led     map[string]bool
}

func (l *leaders) set(id string, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading[id] = on
	if on {
		l.led[id] = true
	}
}

func (l *leaders) now() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, id := range []string{"elector-a", "elector-b", "elector-c"} {
		if l.leading[id] {
			out = append(out, id)
		}
	}
	return out
}

// elect runs one elector on the Lease until its context ends; done is closed when it returns.
// lease is the duration it writes into the Lease while it holds it.
func (e *env) elect(ctx context.Context, id string, release bool, lease time.Duration, l *leaders) (chan struct{}, error) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: "check-leader", Namespace: e.ns},
		Client:     e.pb.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   lease * 3 / 4,
		RetryPeriod:     200 * time.Millisecond,
		ReleaseOnCancel: release,
		Name:            id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { l.set(id, true) },
			OnStoppedLeading: func() { l.set(id, false) },
		},
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	return done, nil
}

func (e *env) holder(ctx context.Context) (string, int32, error) {
	lease, err := e.json.CoordinationV1().Leases(e.ns).Get(ctx, "check-leader", metav1.GetOptions{})
	if err != nil {
		return "", 0, err
	}
	holder, transitions := "", int32(0)
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.LeaseTransitions != nil {
		transitions = *lease.Spec.LeaseTransitions
	}
	return holder, transitions, nil
}

// releasedLease is the lease elector-b holds and releases: long, so that a handover that waited
// for its expiry instead of the release cannot pass for one.
const releasedLease = 12 * time.Second

// checkLeaderElection: two electors on one Lease, exactly one leads; when the leader stops
// without releasing, the other takes over once the lease expires; a leader that releases on
// cancel hands over at once (a third elector leads within a retry period or two).
func checkLeaderElection(ctx context.Context, e *env) error {
	l := &leaders{leading: map[string]bool{}, led: map[string]bool{}}
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	doneA, err := e.elect(actx, "elector-a", false, 2*time.Second, l)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "elector-a to lead", func() (bool, error) { return len(l.now()) == 1, nil }); err != nil {
		return err
	}
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	doneB, err := e.elect(bctx, "elector-b", true, releasedLease, l)
	if err != nil {
		return err
	}
	// Three lease durations with both running: a only, renewing.
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		if got := l.now(); len(got) != 1 || got[0] != "elector-a" {
			return fmt.Errorf("leaders while elector-a renews: %v, want [elector-a]", got)
		}
	}
	if holder, _, err := e.holder(ctx); err != nil || holder != "elector-a" {
		return fmt.Errorf("the Lease's holder is %q (%v), want elector-a", holder, err)
	}
	stopA() // stops renewing; the Lease is not released
	<-doneA
	stoppedA := time.Now()
	if err := waitFor(ctx, "elector-b to take over", func() (bool, error) {
		got := l.now()
		return len(got) == 1 && got[0] == "elector-b", nil
	}); err != nil {
		return fmt.Errorf("%w (leaders: %v)", err, l.now())
	}
	took := time.Since(stoppedA)
	if took < time.Second {
		return fmt.Errorf("elector-b led %s after elector-a stopped, before the 2 s lease could expire", took)
	}
	holder, transitions, err := e.holder(ctx)
	if err != nil || holder != "elector-b" || transitions != 1 {
		return fmt.Errorf("the Lease says holder %q, %d transitions (%v); want elector-b, 1", holder, transitions, err)
	}
	e.logf("elector-b led %s after elector-a stopped", took.Round(10*time.Millisecond))
	cctx, stopC := context.WithCancel(ctx)
	defer stopC()
	doneC, err := e.elect(cctx, "elector-c", false, releasedLease, l)
	if err != nil {
		return err
	}
	stopB() // releases the Lease
	<-doneB
	stoppedB := time.Now()
	if err := waitFor(ctx, "elector-c to take over the released Lease", func() (bool, error) {
		got := l.now()
		return len(got) == 1 && got[0] == "elector-c", nil
	}); err != nil {
		return fmt.Errorf("%w (leaders: %v)", err, l.now())
	}
	// Without the release elector-c would wait out elector-b's whole lease (releasedLease); a
	// release hands over within retry periods. Half the lease between the two keeps the check
	// meaningful on a loaded machine, where a retry period can take a second or two.
	if took := time.Since(stoppedB); took > releasedLease/2 {
		return fmt.Errorf("elector-c led %s after elector-b released the Lease; a release hands over within retry periods, not after the %s lease", took, releasedLease)
	}
	holder, transitions, err = e.holder(ctx)
	if err != nil || holder != "elector-c" || transitions != 2 {
		return fmt.Errorf("the Lease says holder %q, %d transitions (%v); want elector-c, 2", holder, transitions, err)
	}
	stopC()
	<-doneC
	return nil
}
