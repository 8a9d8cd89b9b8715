package main

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

func ptr[T any](v T) *T { return &v }

// A kind the check writes both ways: create builds the object named name and creates it with
// the given clientset; get reads it back (always as JSON).
type pbCase struct {
	kind   string
	create func(ctx context.Context, cs kubernetes.Interface, ns, name string) error
	get    func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error)
	// paths (dotted) that legitimately differ between two objects of different names
	differ []string
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "pb", "ray.io/node-type": "head"},
			Annotations: map[string]string{"note": "protobuf"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh", "-c", "true"}}},
			Containers: []corev1.Container{{
				Name: "ray-head", Image: "rayproject/ray:2.46.0", ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/bash", "-lc", "--"}, Args: []string{"ray start --head --block"},
				WorkingDir: "/home/ray",
				Ports: []corev1.ContainerPort{{Name: "gcs", ContainerPort: 6379, Protocol: corev1.ProtocolTCP},
					{Name: "dashboard", ContainerPort: 8265}},
				Env: []corev1.EnvVar{{Name: "A", Value: "1"},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "pw", Optional: ptr(true)}}},
					{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
						ContainerName: "ray-head", Resource: "limits.cpu", Divisor: resource.MustParse("1")}}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/tmp/ray"},
					{Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true, SubPath: "x"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"bash", "-c", "wget -T 2 -q -O- http://localhost:52365/-/healthz"}}},
					InitialDelaySeconds: 10, TimeoutSeconds: 2, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 10},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromString("dashboard"), Scheme: corev1.URISchemeHTTP}},
					PeriodSeconds: 5, FailureThreshold: 120},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"ray", "stop"}}}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(1000)), AllowPrivilegeEscalation: ptr(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Gi"))}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr(int32(0o644))}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			ServiceAccountName:            "ray",
			NodeSelector:                  map[string]string{"pool": "cpu"},
			Tolerations: []corev1.Toleration{{Key: "ray", Operator: corev1.TolerationOpEqual, Value: "yes",
				Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}}},
			EnableServiceLinks: ptr(false),
		},
	}
}

var pbCases = []pbCase{
	{kind: "Pod",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, testPod(name), metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Service", differ: []string{"spec.clusterIP", "spec.clusterIPs"},
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"ray.io/cluster": "c"}},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "pb"}, Type: corev1.ServiceTypeClusterIP,
					Ports: []corev1.ServicePort{{Name: "gcs", Port: 6379, TargetPort: intstr.FromInt32(6379), Protocol: corev1.ProtocolTCP},
						{Name: "dashboard", Port: 8265, TargetPort: intstr.FromString("dashboard"), AppProtocol: ptr("http")}}}},
				metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Secret",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"pw": []byte("s3cr\x00t")},
				StringData: map[string]string{"user": "ray"}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "ConfigMap",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string]string{"a": "1", "empty": ""}, BinaryData: map[string][]byte{"b": {0, 1, 2}}},
				metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Lease",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			at := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC))
			_, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("me"), LeaseDurationSeconds: ptr(int32(15)),
					AcquireTime: &at, RenewTime: &at, LeaseTransitions: ptr(int32(0))}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Deployment",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			labels := map[string]string{"app": "pb-deploy"}
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
						RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromString("25%")), MaxUnavailable: ptr(intstr.FromInt32(0))}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}},
				metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Job", differ: []string{"spec.selector", "spec.template.metadata.labels"},
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: batchv1.JobSpec{BackoffLimit: ptr(int32(2)), Completions: ptr(int32(1)), Parallelism: ptr(int32(1)),
					ActiveDeadlineSeconds: ptr(int64(600)), Suspend: ptr(true), TTLSecondsAfterFinished: ptr(int32(60)),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "submit", Image: "rayproject/ray:2.46.0",
							Command: []string{"ray", "job", "submit"}}}}}}},
				metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Event", differ: []string{"involvedObject.name"},
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			_, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
				InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Namespace: ns, Name: name, APIVersion: "ray.io/v1", UID: "u-1"},
				Reason:         "CreatedHeadPod", Message: "Created head Pod", Type: corev1.EventTypeNormal,
				Source: corev1.EventSource{Component: "raycluster-controller"}, FirstTimestamp: at, LastTimestamp: at, Count: 1,
				ReportingController: "raycluster-controller", ReportingInstance: "x"}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoreV1().Events(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "EndpointSlice",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/service-name": "svc"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
					NodeName:   ptr("node-1")}},
				Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8000)), Protocol: ptr(corev1.ProtocolTCP)}}},
				metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "ServiceAccount",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name},
				AutomountServiceAccountToken: ptr(false)}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "Role",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "services"},
					Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
		}},
	{kind: "RoleBinding",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
			_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "r"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ray", Namespace: ns}}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (runtime.Object, error) {
			return cs.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
		}},
}

// comparable strips what differs between two objects created apart (name, uid, versions,
// timestamps, status, the case's own paths) and gives the rest as plain JSON values.
func comparable(obj runtime.Object, differ []string) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(u, "status") // the controllers' (in a full world Pods run, Deployments roll out)
	meta, _ := u["metadata"].(map[string]any)
	for _, k := range []string{"name", "uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink"} {
		delete(meta, k)
	}
	unsuffixAccessVolume(u)
	for _, path := range differ {
		parts := strings.Split(path, ".")
		m := u
		for _, p := range parts[:len(parts)-1] {
			m, _ = m[p].(map[string]any)
		}
		if m != nil {
			delete(m, parts[len(parts)-1])
		}
	}
	return u, nil
}

// unsuffixAccessVolume drops the random suffix of the ServiceAccount admission's
// kube-api-access-XXXXX volume (each Pod draws its own) from a Pod's volumes and mounts.
func unsuffixAccessVolume(u map[string]any) {
	spec, _ := u["spec"].(map[string]any)
	if spec == nil {
		return
	}
	rename := func(item any) {
		if m, ok := item.(map[string]any); ok {
			if name, _ := m["name"].(string); strings.HasPrefix(name, "kube-api-access-") {
				m["name"] = "kube-api-access"
			}
		}
	}
	volumes, _ := spec["volumes"].([]any)
	for _, v := range volumes {
		rename(v)
	}
	for _, key := range []string{"containers", "initContainers"} {
		containers, _ := spec[key].([]any)
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			mounts, _ := cm["volumeMounts"].([]any)
			for _, m := range mounts {
				rename(m)
			}
		}
	}
}

// diff lists the dotted paths where a and b differ.
func diff(prefix string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diff(prefix+"."+k, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diff(fmt.Sprintf("%s[%d]", prefix, i), al[i], bl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fmt.Sprintf("%s: protobuf %v, JSON %v", prefix, a, b))
	}
}

// checkProtobuf: each built-in kind a Go controller writes, created once with a protobuf body
// and once with JSON, reads back the same; protobuf updates, deletes with protobuf
// DeleteOptions, lists and watches with protobuf preferred in Accept work.
func checkProtobuf(ctx context.Context, e *env) error {
	var problems []string
	for _, c := range pbCases {
		pbName, jsonName := "pb-"+strings.ToLower(c.kind), "json-"+strings.ToLower(c.kind)
		if err := c.create(ctx, e.pb, e.ns, pbName); err != nil {
			problems = append(problems, fmt.Sprintf("%s: create with a protobuf body: %v", c.kind, err))
			continue
		}
		if err := c.create(ctx, e.json, e.ns, jsonName); err != nil {
			problems = append(problems, fmt.Sprintf("%s: create with a JSON body: %v", c.kind, err))
			continue
		}
		viaPB, err := c.get(ctx, e.json, e.ns, pbName)
		if err != nil {
			return err
		}
		viaJSON, err := c.get(ctx, e.json, e.ns, jsonName)
		if err != nil {
			return err
		}
		a, err := comparable(viaPB, c.differ)
		if err != nil {
			return err
		}
		b, err := comparable(viaJSON, c.differ)
		if err != nil {
			return err
		}
		var diffs []string
		diff(c.kind, a, b, &diffs)
		for _, d := range diffs {
			problems = append(problems, d)
		}
		if len(diffs) == 0 {
			e.logf("%s: the same read back from protobuf and JSON", c.kind)
		}
	}
	pods := e.pb.CoreV1().Pods(e.ns)
	pod, err := pods.Get(ctx, "pb-pod", metav1.GetOptions{})
	if err != nil {
		return err
	}
	// From a list's resourceVersion: the Pod's own may be older than the server's history
	// window by now (the check runs with a small one).
	now, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=pb-pod"})
	if err != nil {
		return err
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: now.ResourceVersion,
		FieldSelector: "metadata.name=pb-pod"})
	if err != nil {
		return fmt.Errorf("watch with protobuf preferred: %w", err)
	}
	defer w.Stop()
	pod.Labels["updated"] = "yes"
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update with a protobuf body: %w", err)
	}
	select {
	case ev := <-w.ResultChan():
		got, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Modified || !ok || got.Labels["updated"] != "yes" {
			return fmt.Errorf("watch event after the update: %s %v (and %d differences before: %s)",
				ev.Type, ev.Object, len(problems), strings.Join(problems, "; "))
		}
	case <-ctx.Done():
		return fmt.Errorf("no watch event after the update")
	}
	// A status write in protobuf, as controller-runtime's client sends it (tests mark Pods
	// Running and Ready so).
	// (In a full world the scheduler may write the Pod's status too: retry on conflict.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if pod, err = pods.Get(ctx, "pb-pod", metav1.GetOptions{}); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		_, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("status update with a protobuf body: %w", err)
	}
	got, err := e.json.CoreV1().Pods(e.ns).Get(ctx, "pb-pod", metav1.GetOptions{})
	if err != nil {
		return err
	}
	ready := false
	for _, c := range got.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	if got.Status.Phase != corev1.PodRunning || !ready {
		return fmt.Errorf("after a protobuf status update the Pod is %s, ready %v", got.Status.Phase, ready)
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=pb"})
	if err != nil || len(list.Items) != 2 {
		return fmt.Errorf("list with protobuf preferred: %v items (%v), want 2", len(list.Items), err)
	}
	if err := pods.Delete(ctx, "pb-pod", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)),
		PropagationPolicy: ptr(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &pod.UID}}); err != nil {
		return fmt.Errorf("delete with protobuf DeleteOptions: %w", err)
	}
	if err := waitFor(ctx, "pb-pod to be gone", func() (bool, error) {
		_, err := pods.Get(ctx, "pb-pod", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d differences:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}
