"""Reading the protobuf bodies Go clients send for built-in kinds.

client-go's generated clientsets, controller-runtime's client and kubectl's typed generators
(``kubectl create deployment|job|service|role...``) send built-in kinds as
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0`` and a ``runtime.Unknown`` envelope
(``typeMeta``, ``raw``) around the object's own message. client-go never retries such a write
as JSON (its 415 fallback is for CBOR only), so the server must read it. This module reads it
into the JSON-shaped dict the API server takes, from field tables written here for the kinds Go
clients of KubeRay write (field numbers as in k8s.io/api's ``generated.proto``), and the status
of Pods and Jobs that tests write through the ``/status`` subresource (KubeRay's envtest suite
marks Pods Running and Jobs Complete so).

The tables are strict: a field number a table does not list (``affinity`` of a PodSpec, say)
gets 415 naming the message and the field, so nothing is dropped silently; the client can send
that object as JSON. ``status`` is skipped on the main resource, which ignores it; on a
``/status`` write it is read for the kinds in `STATUS` and refused with 415 for the others; for a
CertificateSigningRequest it is read on ``/approval`` too, where ``kubectl certificate approve``
sends its conditions. Responses are always JSON, which the clients' ``Accept`` headers allow.

Go writes every non-pointer field, empty or zero; those are left out here (as ``omitempty``
would in JSON), except the fields marked as pointers, whose zero was set on purpose
(``replicas: 0``, ``optional: false``, ``emptyDir: {}``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from ..apiserver.errors import BadRequest, UnsupportedMediaType

MAGIC = b"k8s\x00"
Obj = dict[str, Any]
Fields = dict[int, list[Any]]

# -- the wire format ----------------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise BadRequest("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise BadRequest("protobuf varint too long")


def fields(data: bytes) -> Fields:
    """Field number → its values in order (varints as int, length-delimited as bytes)."""
    out: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise BadRequest("truncated protobuf field")
            value, pos = data[pos:pos + size], pos + size
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise BadRequest(f"unsupported protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _signed(value: Any) -> int:
    """A varint read as Go's int32/int64 (negative numbers are sign-extended to 64 bits)."""
    if not isinstance(value, int):
        raise BadRequest("a protobuf integer field is not a varint")
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise BadRequest("a protobuf string field is not length-delimited")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise BadRequest("a protobuf string field is not UTF-8") from None


# -- the tables ---------------------------------------------------------------------------------
#
# One message per line: ``json-name:number[:type][flags]`` for each field. Types: ``s`` string
# (the default), ``i`` integer, ``b`` bool, ``y`` bytes (base64 in JSON), ``Q`` a Quantity,
# ``IS`` an IntOrString, ``T`` a Time, ``MT`` a MicroTime, ``ms`` map of strings, ``mQ`` map of
# Quantities, ``my`` map of bytes, ``F`` a FieldsV1 (raw JSON), ``-`` skipped, or a message of
# this table. Flags: ``*`` repeated, ``?`` a Go pointer (its zero value is kept), ``^`` inlined
# into the parent (Go's ``json:",inline"``).

_TABLES = """
ObjectMeta name:1 generateName:2 namespace:3 selfLink:4 uid:5 resourceVersion:6 generation:7:i
  creationTimestamp:8:T deletionTimestamp:9:T deletionGracePeriodSeconds:10:i? labels:11:ms
  annotations:12:ms ownerReferences:13:OwnerReference* finalizers:14* managedFields:17:MFE*
OwnerReference kind:1 name:3 uid:4 apiVersion:5 controller:6:b? blockOwnerDeletion:7:b?
MFE manager:1 operation:2 apiVersion:3 time:4:T fieldsType:6 fieldsV1:7:F subresource:8
LabelSelector matchLabels:1:ms matchExpressions:2:LabelSelectorRequirement*
LabelSelectorRequirement key:1 operator:2 values:3*
ObjectReference kind:1 namespace:2 name:3 uid:4 apiVersion:5 resourceVersion:6 fieldPath:7
LocalObjectReference name:1

Namespace metadata:1:ObjectMeta spec:2:NamespaceSpec status:3:-
NamespaceSpec finalizers:1*
ConfigMap metadata:1:ObjectMeta data:2:ms binaryData:3:my immutable:4:b?
Secret metadata:1:ObjectMeta data:2:my type:3 stringData:4:ms immutable:5:b?
ServiceAccount metadata:1:ObjectMeta secrets:2:ObjectReference*
  imagePullSecrets:3:LocalObjectReference* automountServiceAccountToken:4:b?

Pod metadata:1:ObjectMeta spec:2:PodSpec status:3:-
PodTemplateSpec metadata:1:ObjectMeta spec:2:PodSpec
PodSpec volumes:1:Volume* containers:2:Container* restartPolicy:3
  terminationGracePeriodSeconds:4:i? activeDeadlineSeconds:5:i? dnsPolicy:6 nodeSelector:7:ms
  serviceAccountName:8 serviceAccount:9 nodeName:10 hostNetwork:11:b hostPID:12:b hostIPC:13:b
  securityContext:14:PodSecurityContext? imagePullSecrets:15:LocalObjectReference* hostname:16
  subdomain:17 affinity:18:Affinity? schedulerName:19 initContainers:20:Container*
  automountServiceAccountToken:21:b? tolerations:22:Toleration* hostAliases:23:HostAlias*
  priorityClassName:24 priority:25:i? dnsConfig:26:PodDNSConfig? shareProcessNamespace:27:b?
  readinessGates:28:PodReadinessGate* runtimeClassName:29? enableServiceLinks:30:b?
  preemptionPolicy:31? overhead:32:mQ topologySpreadConstraints:33:TopologySpreadConstraint*
  setHostnameAsFQDN:35:b? os:36:PodOS? hostUsers:37:b? schedulingGates:38:PodSchedulingGate*
  resources:40:ResourceRequirements? hostnameOverride:41?
Container name:1 image:2 command:3* args:4* workingDir:5 ports:6:ContainerPort* env:7:EnvVar*
  resources:8:ResourceRequirements volumeMounts:9:VolumeMount* livenessProbe:10:Probe?
  readinessProbe:11:Probe? lifecycle:12:Lifecycle? terminationMessagePath:13 imagePullPolicy:14
  securityContext:15:SecurityContext? stdin:16:b stdinOnce:17:b tty:18:b
  envFrom:19:EnvFromSource* terminationMessagePolicy:20 volumeDevices:21:VolumeDevice*
  startupProbe:22:Probe? resizePolicy:23:ContainerResizePolicy* restartPolicy:24?
VolumeDevice name:1 devicePath:2
ContainerResizePolicy resourceName:1 restartPolicy:2
ContainerPort name:1 hostPort:2:i containerPort:3:i protocol:4 hostIP:5
EnvVar name:1 value:2 valueFrom:3:EnvVarSource?
EnvVarSource fieldRef:1:ObjectFieldSelector? resourceFieldRef:2:ResourceFieldSelector?
  configMapKeyRef:3:KeySelector? secretKeyRef:4:KeySelector?
ObjectFieldSelector apiVersion:1 fieldPath:2
ResourceFieldSelector containerName:1 resource:2 divisor:3:Q
KeySelector localObjectReference:1:LocalObjectReference^ key:2 optional:3:b?
EnvFromSource prefix:1 configMapRef:2:EnvSource? secretRef:3:EnvSource?
EnvSource localObjectReference:1:LocalObjectReference^ optional:2:b?
ResourceRequirements limits:1:mQ requests:2:mQ claims:3:ResourceClaim*
ResourceClaim name:1 request:2?
VolumeMount name:1 readOnly:2:b mountPath:3 subPath:4 mountPropagation:5? subPathExpr:6
Probe handler:1:ProbeHandler^ initialDelaySeconds:2:i timeoutSeconds:3:i periodSeconds:4:i
  successThreshold:5:i failureThreshold:6:i terminationGracePeriodSeconds:7:i?
ProbeHandler exec:1:ExecAction? httpGet:2:HTTPGetAction? tcpSocket:3:TCPSocketAction?
  grpc:4:GRPCAction?
LifecycleHandler exec:1:ExecAction? httpGet:2:HTTPGetAction? tcpSocket:3:TCPSocketAction?
  sleep:4:SleepAction?
Lifecycle postStart:1:LifecycleHandler? preStop:2:LifecycleHandler? stopSignal:3?
ExecAction command:1*
HTTPGetAction path:1 port:2:IS host:3 scheme:4 httpHeaders:5:HTTPHeader*
HTTPHeader name:1 value:2
TCPSocketAction port:1:IS host:2
GRPCAction port:1:i service:2?
SleepAction seconds:1:i
SecurityContext capabilities:1:Capabilities? privileged:2:b? seLinuxOptions:3:SELinuxOptions?
  runAsUser:4:i? runAsNonRoot:5:b? readOnlyRootFilesystem:6:b? allowPrivilegeEscalation:7:b?
  runAsGroup:8:i? procMount:9? windowsOptions:10:WindowsOptions?
  seccompProfile:11:SeccompProfile? appArmorProfile:12:SeccompProfile?
SELinuxOptions user:1 role:2 type:3 level:4
WindowsOptions gmsaCredentialSpecName:1? gmsaCredentialSpec:2? runAsUserName:3?
  hostProcess:4:b?
SeccompProfile type:1 localhostProfile:2?
Capabilities add:1* drop:2*
PodSecurityContext seLinuxOptions:1:SELinuxOptions? runAsUser:2:i? runAsNonRoot:3:b?
  supplementalGroups:4:i* fsGroup:5:i? runAsGroup:6:i? sysctls:7:Sysctl*
  windowsOptions:8:WindowsOptions? fsGroupChangePolicy:9? seccompProfile:10:SeccompProfile?
  appArmorProfile:11:SeccompProfile? supplementalGroupsPolicy:12? seLinuxChangePolicy:13?
Sysctl name:1 value:2
Affinity nodeAffinity:1:NodeAffinity? podAffinity:2:PodAffinity? podAntiAffinity:3:PodAffinity?
NodeAffinity requiredDuringSchedulingIgnoredDuringExecution:1:NodeSelector?
  preferredDuringSchedulingIgnoredDuringExecution:2:PreferredSchedulingTerm*
NodeSelector nodeSelectorTerms:1:NodeSelectorTerm*
NodeSelectorTerm matchExpressions:1:NodeSelectorRequirement* matchFields:2:NodeSelectorRequirement*
NodeSelectorRequirement key:1 operator:2 values:3*
PreferredSchedulingTerm weight:1:i preference:2:NodeSelectorTerm
PodAffinity requiredDuringSchedulingIgnoredDuringExecution:1:PodAffinityTerm*
  preferredDuringSchedulingIgnoredDuringExecution:2:WeightedPodAffinityTerm*
PodAffinityTerm labelSelector:1:LabelSelector? namespaces:2* topologyKey:3
  namespaceSelector:4:LabelSelector? matchLabelKeys:5* mismatchLabelKeys:6*
WeightedPodAffinityTerm weight:1:i podAffinityTerm:2:PodAffinityTerm
TopologySpreadConstraint maxSkew:1:i topologyKey:2 whenUnsatisfiable:3
  labelSelector:4:LabelSelector? minDomains:5:i? nodeAffinityPolicy:6? nodeTaintsPolicy:7?
  matchLabelKeys:8*
PodDNSConfig nameservers:1* searches:2* options:3:PodDNSConfigOption*
PodDNSConfigOption name:1 value:2?
HostAlias ip:1 hostnames:2*
PodReadinessGate conditionType:1
PodOS name:1
PodSchedulingGate name:1
Toleration key:1 operator:2 value:3 effect:4 tolerationSeconds:5:i?
Volume name:1 volumeSource:2:VolumeSource^
VolumeSource hostPath:1:HostPathVolumeSource? emptyDir:2:EmptyDirVolumeSource?
  secret:6:SecretVolumeSource? nfs:7:NFSVolumeSource? persistentVolumeClaim:10:PVCVolumeSource?
  downwardAPI:16:DownwardAPIVolumeSource? configMap:19:ConfigMapVolumeSource?
  projected:26:ProjectedVolumeSource? csi:28:CSIVolumeSource?
NFSVolumeSource server:1 path:2 readOnly:3:b
DownwardAPIVolumeSource items:1:DownwardAPIVolumeFile* defaultMode:2:i?
DownwardAPIVolumeFile path:1 fieldRef:2:ObjectFieldSelector? resourceFieldRef:3:ResourceFieldSelector?
  mode:4:i?
ProjectedVolumeSource sources:1:VolumeProjection* defaultMode:2:i?
VolumeProjection secret:1:Projection? downwardAPI:2:DownwardAPIProjection?
  configMap:3:Projection? serviceAccountToken:4:TokenProjection?
Projection localObjectReference:1:LocalObjectReference^ items:2:KeyToPath* optional:4:b?
DownwardAPIProjection items:1:DownwardAPIVolumeFile*
TokenProjection audience:1 expirationSeconds:2:i? path:3
CSIVolumeSource driver:1 readOnly:2:b? fsType:3? volumeAttributes:4:ms
  nodePublishSecretRef:5:LocalObjectReference?
HostPathVolumeSource path:1 type:2?
EmptyDirVolumeSource medium:1 sizeLimit:2:Q
SecretVolumeSource secretName:1 items:2:KeyToPath* defaultMode:3:i? optional:4:b?
ConfigMapVolumeSource localObjectReference:1:LocalObjectReference^ items:2:KeyToPath*
  defaultMode:3:i? optional:4:b?
KeyToPath key:1 path:2 mode:3:i?
PVCVolumeSource claimName:1 readOnly:2:b

Service metadata:1:ObjectMeta spec:2:ServiceSpec status:3:-
ServiceSpec ports:1:ServicePort* selector:2:ms clusterIP:3 type:4 externalIPs:5*
  sessionAffinity:7 loadBalancerIP:8 loadBalancerSourceRanges:9* externalName:10
  externalTrafficPolicy:11 healthCheckNodePort:12:i publishNotReadyAddresses:13:b
  ipFamilyPolicy:17? clusterIPs:18* ipFamilies:19* allocateLoadBalancerNodePorts:20:b?
  loadBalancerClass:21? internalTrafficPolicy:22? sessionAffinityConfig:14:SessionAffinityConfig?
  trafficDistribution:23?
SessionAffinityConfig clientIP:1:ClientIPConfig?
ClientIPConfig timeoutSeconds:1:i?
ServicePort name:1 protocol:2 port:3:i targetPort:4:IS nodePort:5:i appProtocol:6?
Endpoints metadata:1:ObjectMeta subsets:2:EndpointSubset*
EndpointSubset addresses:1:EndpointAddress* notReadyAddresses:2:EndpointAddress*
  ports:3:CoreEndpointPort*
EndpointAddress ip:1 targetRef:2:ObjectReference? hostname:3 nodeName:4?
CoreEndpointPort name:1 port:2:i protocol:3 appProtocol:4?
Event metadata:1:ObjectMeta involvedObject:2:ObjectReference reason:3 message:4
  source:5:EventSource firstTimestamp:6:T lastTimestamp:7:T count:8:i type:9 eventTime:10:MT
  series:11:EventSeries? action:12 related:13:ObjectReference? reportingComponent:14
  reportingInstance:15
EventSource component:1 host:2
EventsV1Event metadata:1:ObjectMeta eventTime:2:MT series:3:EventSeries? reportingController:4
  reportingInstance:5 action:6 reason:7 regarding:8:ObjectReference related:9:ObjectReference?
  note:10 type:11 deprecatedSource:12:EventSource deprecatedFirstTimestamp:13:T
  deprecatedLastTimestamp:14:T deprecatedCount:15:i
Node metadata:1:ObjectMeta spec:2:NodeSpec status:3:-
NodeSpec podCIDR:1 externalID:2 providerID:3 unschedulable:4:b taints:5:Taint* podCIDRs:7*
Taint key:1 value:2 effect:3 timeAdded:4:T?
EventSeries count:1:i lastObservedTime:2:MT

PodStatus phase:1 conditions:2:PodCondition* message:3 reason:4 hostIP:5 podIP:6
  startTime:7:T? containerStatuses:8:ContainerStatus* qosClass:9
  initContainerStatuses:10:ContainerStatus* nominatedNodeName:11 podIPs:12:PodIP*
  ephemeralContainerStatuses:13:ContainerStatus* resize:14 hostIPs:16:PodIP*
  observedGeneration:17:i
PodCondition type:1 status:2 lastProbeTime:3:T lastTransitionTime:4:T reason:5 message:6
  observedGeneration:7:i
PodIP ip:1
ContainerStatus name:1 state:2:ContainerState lastState:3:ContainerState ready:4:b
  restartCount:5:i image:6 imageID:7 containerID:8 started:9:b? allocatedResources:10:mQ
  resources:11:ResourceRequirements? stopSignal:15?
ContainerState waiting:1:ContainerStateWaiting? running:2:ContainerStateRunning?
  terminated:3:ContainerStateTerminated?
ContainerStateWaiting reason:1 message:2
ContainerStateRunning startedAt:1:T
ContainerStateTerminated exitCode:1:i signal:2:i reason:3 message:4 startedAt:5:T
  finishedAt:6:T containerID:7

Lease metadata:1:ObjectMeta spec:2:LeaseSpec
LeaseSpec holderIdentity:1? leaseDurationSeconds:2:i? acquireTime:3:MT? renewTime:4:MT?
  leaseTransitions:5:i? strategy:6? preferredHolder:7?
EndpointSlice metadata:1:ObjectMeta endpoints:2:SliceEndpoint* ports:3:SlicePort*
  addressType:4
SliceEndpoint addresses:1* conditions:2:EndpointConditions hostname:3? targetRef:4:ObjectReference?
  nodeName:6? zone:7?
EndpointConditions ready:1:b? serving:2:b? terminating:3:b?
SlicePort name:1? protocol:2? port:3:i? appProtocol:4?

Job metadata:1:ObjectMeta spec:2:JobSpec status:3:-
JobSpec parallelism:1:i? completions:2:i? activeDeadlineSeconds:3:i? selector:4:LabelSelector?
  manualSelector:5:b? template:6:PodTemplateSpec backoffLimit:7:i? ttlSecondsAfterFinished:8:i?
  completionMode:9? suspend:10:b? backoffLimitPerIndex:12:i? maxFailedIndexes:13:i?
  podReplacementPolicy:14? managedBy:15?
CronJob metadata:1:ObjectMeta spec:2:CronJobSpec status:3:-
CronJobSpec schedule:1 startingDeadlineSeconds:2:i? concurrencyPolicy:3 suspend:4:b?
  jobTemplate:5:JobTemplateSpec successfulJobsHistoryLimit:6:i? failedJobsHistoryLimit:7:i?
  timeZone:8?
JobTemplateSpec metadata:1:ObjectMeta spec:2:JobSpec
JobStatus conditions:1:JobCondition* startTime:2:T? completionTime:3:T? active:4:i
  succeeded:5:i failed:6:i completedIndexes:7 uncountedTerminatedPods:8:UncountedTerminatedPods?
  ready:9:i? failedIndexes:10? terminating:11:i?
JobCondition type:1 status:2 lastProbeTime:3:T lastTransitionTime:4:T reason:5 message:6
UncountedTerminatedPods succeeded:1* failed:2*
Deployment metadata:1:ObjectMeta spec:2:DeploymentSpec status:3:-
DeploymentSpec replicas:1:i? selector:2:LabelSelector? template:3:PodTemplateSpec
  strategy:4:DeploymentStrategy minReadySeconds:5:i revisionHistoryLimit:6:i? paused:7:b
  progressDeadlineSeconds:9:i?
DeploymentStrategy type:1 rollingUpdate:2:RollingUpdateDeployment?
RollingUpdateDeployment maxUnavailable:1:IS? maxSurge:2:IS?

Ingress metadata:1:ObjectMeta spec:2:IngressSpec status:3:-
IngressSpec defaultBackend:1:IngressBackend? tls:2:IngressTLS* rules:3:IngressRule*
  ingressClassName:4?
IngressBackend resource:3:TypedLocalObjectReference? service:4:IngressServiceBackend?
IngressServiceBackend name:1 port:2:ServiceBackendPort
ServiceBackendPort name:1 number:2:i
TypedLocalObjectReference apiGroup:1? kind:2 name:3
IngressTLS hosts:1* secretName:2
IngressRule host:1 ingressRuleValue:2:IngressRuleValue^
IngressRuleValue http:1:HTTPIngressRuleValue?
HTTPIngressRuleValue paths:1:HTTPIngressPath*
HTTPIngressPath path:1 backend:2:IngressBackend pathType:3?

Role metadata:1:ObjectMeta rules:2:PolicyRule*
ClusterRole metadata:1:ObjectMeta rules:2:PolicyRule* aggregationRule:3:AggregationRule?
AggregationRule clusterRoleSelectors:1:LabelSelector*
PolicyRule verbs:1* apiGroups:2* resources:3* resourceNames:4* nonResourceURLs:5*
RoleBinding metadata:1:ObjectMeta subjects:2:Subject* roleRef:3:RoleRef
ClusterRoleBinding metadata:1:ObjectMeta subjects:2:Subject* roleRef:3:RoleRef
Subject kind:1 apiGroup:2 name:3 namespace:4
RoleRef apiGroup:1 kind:2 name:3

DeleteOptions gracePeriodSeconds:1:i? preconditions:2:Preconditions? orphanDependents:3:b?
  propagationPolicy:4? dryRun:5* ignoreStoreReadErrorWithClusterBreakingPotential:6:b?
Preconditions uid:1? resourceVersion:2?
Scale metadata:1:ObjectMeta spec:2:ScaleSpec status:3:-
ScaleSpec replicas:1:i?

SelfSubjectAccessReview metadata:1:ObjectMeta spec:2:SSARSpec status:3:-
SSARSpec resourceAttributes:1:ResourceAttributes? nonResourceAttributes:2:NonResourceAttributes?
ResourceAttributes namespace:1 verb:2 group:3 version:4 resource:5 subresource:6 name:7
  fieldSelector:8:SelectorAttributes? labelSelector:9:SelectorAttributes?
SelectorAttributes rawSelector:1 requirements:2:LabelSelectorRequirement*
NonResourceAttributes path:1 verb:2
SelfSubjectRulesReview metadata:1:ObjectMeta spec:2:SSRRSpec status:3:-
SSRRSpec namespace:1
SelfSubjectReview metadata:1:ObjectMeta status:2:-
TokenRequest metadata:1:ObjectMeta spec:2:TokenRequestSpec status:3:-
TokenRequestSpec audiences:1* boundObjectRef:3:BoundObjectReference? expirationSeconds:4:i?
BoundObjectReference kind:1 apiVersion:2 name:3 uid:4
TokenReview metadata:1:ObjectMeta spec:2:TokenReviewSpec status:3:-
TokenReviewSpec token:1 audiences:2*

CertificateSigningRequest metadata:1:ObjectMeta spec:2:CSRSpec status:3:CSRStatus?
CSRSpec request:1:y username:2 uid:3 groups:4* usages:5* signerName:7 expirationSeconds:8:i?
CSRStatus conditions:1:CSRCondition* certificate:2:y
CSRCondition type:1 reason:2 message:3 lastUpdateTime:4:T lastTransitionTime:5:T status:6
"""

#: A field: (JSON name, type, repeated, pointer, inline).
_Field = tuple[str, str, bool, bool, bool]


def _parse_tables(text: str) -> dict[str, dict[int, _Field]]:
    out: dict[str, dict[int, _Field]] = {}
    current: dict[int, _Field] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        words = line.split()
        if not line.startswith(" "):
            assert words[0] not in out, f"{words[0]} is in the tables twice"
            current = out[words[0]] = {}
            words = words[1:]
        assert current is not None
        for word in words:
            flags = ""
            while word[-1] in "*?^":
                flags += word[-1]
                word = word[:-1]
            name, number, *kind = word.split(":")
            current[int(number)] = (name, kind[0] if kind else "s", "*" in flags, "?" in flags,
                                    "^" in flags)
    return out


MESSAGES = _parse_tables(_TABLES)

#: The kinds read from protobuf: (apiVersion, kind) → the message of the object.
KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace", ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret", ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Pod"): "Pod", ("v1", "Service"): "Service", ("v1", "Endpoints"): "Endpoints",
    ("v1", "Event"): "Event", ("events.k8s.io/v1", "Event"): "EventsV1Event",
    ("v1", "Node"): "Node", ("coordination.k8s.io/v1", "Lease"): "Lease",
    ("discovery.k8s.io/v1", "EndpointSlice"): "EndpointSlice", ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("apps/v1", "Deployment"): "Deployment", ("networking.k8s.io/v1", "Ingress"): "Ingress",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
    ("autoscaling/v1", "Scale"): "Scale",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    # ``kubectl create token`` and client-go's TokenReviews (`emu.apiserver.tokens`)
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "TokenReview"): "TokenReview",
    # read with its status: ``kubectl certificate approve`` PUTs it to ``/approval``
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): "CertificateSigningRequest",
}

#: The kinds whose status a ``/status`` write is read for: message → (field, status message).
STATUS: dict[str, tuple[int, str]] = {"Pod": (3, "PodStatus"), "Job": (3, "JobStatus")}

#: Kinds read whatever their apiVersion: a typed client's DELETE sends its DeleteOptions in the
#: client's own group version (``apps/v1``, ``batch/v1``...).
ANY_VERSION: dict[str, str] = {"DeleteOptions": "DeleteOptions"}


# -- values -------------------------------------------------------------------------------------


def _time(raw: Any, micro: bool) -> str | None:
    """A Time/MicroTime message (seconds, nanos) as kube's JSON text; None for the zero time
    (Go writes an empty message for an unset non-pointer time)."""
    f = fields(raw) if isinstance(raw, bytes) else {}
    seconds = _signed(f[1][-1]) if 1 in f else 0
    nanos = _signed(f[2][-1]) if 2 in f else 0
    if seconds == 0 and nanos == 0:
        return None
    try:
        when = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise BadRequest(f"a protobuf time is out of range: {seconds}") from None
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(raw: Any) -> int | str:
    f = fields(raw) if isinstance(raw, bytes) else {}
    if (f.get(1) or [0])[-1] == 1:
        return _text(f[3][-1]) if 3 in f else ""
    return _signed(f[2][-1]) if 2 in f else 0


def _quantity(raw: Any) -> str:
    f = fields(raw) if isinstance(raw, bytes) else {}
    return _text(f[1][-1]) if 1 in f else "0"


def _entry(raw: Any) -> tuple[str, Any]:
    f = fields(raw) if isinstance(raw, bytes) else {}
    return (_text(f[1][-1]) if 1 in f else ""), (f[2][-1] if 2 in f else b"")


def _map(values: list[Any], convert: Callable[[Any], Any]) -> Obj:
    out: Obj = {}
    for raw in values:
        key, value = _entry(raw)
        out[key] = convert(value)
    return out


def _fields_v1(raw: Any) -> Any:
    f = fields(raw) if isinstance(raw, bytes) else {}
    try:
        return orjson.loads(f[1][-1]) if 1 in f else {}
    except orjson.JSONDecodeError:
        raise BadRequest("managedFields fieldsV1 is not JSON") from None


_SCALARS: dict[str, Callable[[Any], Any]] = {
    "s": _text, "i": _signed, "b": lambda v: bool(_signed(v)),
    "y": lambda v: base64.b64encode(v).decode() if isinstance(v, bytes) else "",
    "Q": _quantity, "IS": _int_or_string, "F": _fields_v1,
    "T": lambda v: _time(v, False), "MT": lambda v: _time(v, True),
    "ms": lambda v: _map([v], _text), "mQ": lambda v: _map([v], _quantity),
    "my": lambda v: _map([v], lambda b: base64.b64encode(b).decode()),
}

_EMPTY: tuple[Any, ...] = (None, "", 0, False, [], {})


def message(name: str, raw: bytes) -> Obj:
    """Decode ``raw`` as the table's message ``name``."""
    table = MESSAGES[name]
    out: Obj = {}
    for number, values in fields(raw).items():
        spec = table.get(number)
        if spec is None:
            raise UnsupportedMediaType(
                f"field {number} of the protobuf message {name} is not read by this server; "
                "send this object as JSON (kubectl apply -f; Go clients: ContentType "
                "application/json on the rest.Config)")
        key, kind, repeated, pointer, inline = spec
        if kind == "-":
            continue
        if kind in ("ms", "mQ", "my"):
            value: Any = {}
            for raw_entry in values:
                value.update(_SCALARS[kind](raw_entry))
        elif kind in _SCALARS:
            convert = _SCALARS[kind]
            value = [convert(v) for v in values] if repeated else convert(values[-1])
        else:
            if any(not isinstance(v, bytes) for v in values):
                raise BadRequest(f"field {number} of {name} is not a message")
            value = [message(kind, v) for v in values] if repeated else message(kind, values[-1])
            if inline and isinstance(value, dict):
                out.update(value)
                continue
        if value in _EMPTY and not (pointer and value is not None and value != []):
            continue
        out[key] = value
    return out


def decode(body: bytes, *, status: bool = False) -> Obj:
    """The object in a Kubernetes protobuf body; 415 for a kind (or a field) this module does
    not read. ``status`` (a ``/status`` write): its status is read too, for the kinds in
    `STATUS` (415 for the others)."""
    if not body.startswith(MAGIC):
        raise BadRequest("a protobuf body must start with the Kubernetes magic number")
    envelope = fields(body[len(MAGIC):])
    type_meta = fields(envelope.get(1, [b""])[-1])
    api_version = _text(type_meta[1][-1]) if 1 in type_meta else ""
    kind = _text(type_meta[2][-1]) if 2 in type_meta else ""
    name = KINDS.get((api_version, kind)) or ANY_VERSION.get(kind)
    if name is None:
        raise UnsupportedMediaType(
            f"the body of the request was in protobuf, which this server reads only for "
            f"{', '.join(sorted({k for _, k in KINDS}))}; {api_version} {kind} must be sent as "
            "JSON (kubectl apply -f; Go clients: ContentType application/json on the "
            "rest.Config)")
    if status and name not in STATUS:
        raise UnsupportedMediaType(
            f"protobuf bodies are read on the status subresource of "
            f"{' and '.join(sorted(STATUS))} only; send the status of {api_version} {kind} as "
            "JSON (Go clients: ContentType application/json on the rest.Config)")
    raw = envelope.get(2, [b""])[-1]
    raw = raw if isinstance(raw, bytes) else b""
    obj: Obj = {"apiVersion": api_version, "kind": kind}
    obj.update(message(name, raw))
    if status:
        number, status_message = STATUS[name]
        values = fields(raw).get(number)
        if values:
            if not isinstance(values[-1], bytes):
                raise BadRequest(f"field {number} of {name} is not a message")
            obj["status"] = message(status_message, values[-1])
    if name != "DeleteOptions":
        obj.setdefault("metadata", {})
    return obj
