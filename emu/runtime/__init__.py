"""The controller-runtime / client-go analog: manager, controllers, work queue, leader election.

The names a ported controller uses::

    from emu.runtime import ControllerOptions, Manager, Request, Result, TerminalError
"""

from .builder import Builder as Builder
from .builder import new_controller_managed_by as new_controller_managed_by
from .cache import Cache as Cache
from .cache import CachedClient as CachedClient
from .cache import CacheOptions as CacheOptions
from .controller import Controller as Controller
from .controller import ControllerOptions as ControllerOptions
from .handler import EnqueueRequestForObject as EnqueueRequestForObject
from .handler import EnqueueRequestForOwner as EnqueueRequestForOwner
from .handler import EnqueueRequestsFromMapFunc as EnqueueRequestsFromMapFunc
from .handler import EventHandler as EventHandler
from .http import HttpClient as HttpClient
from .http import HttpResponse as HttpResponse
from .leaderelection import LeaderElector as LeaderElector
from .manager import LeaderElectionLost as LeaderElectionLost
from .manager import Manager as Manager
from .manager import ManagerOptions as ManagerOptions
from .manager import RunnableFunc as RunnableFunc
from .operator_process import OperatorConfig as OperatorConfig
from .operator_process import operator_main as operator_main
from .operator_process import start_operator as start_operator
from .reconcile import Reconciler as Reconciler
from .reconcile import Request as Request
from .reconcile import Result as Result
from .reconcile import TerminalError as TerminalError
from .workqueue import RateLimitingQueue as RateLimitingQueue

__all__ = [
    "Builder",
    "Cache",
    "CacheOptions",
    "CachedClient",
    "Controller",
    "ControllerOptions",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "HttpClient",
    "HttpResponse",
    "LeaderElectionLost",
    "LeaderElector",
    "Manager",
    "ManagerOptions",
    "OperatorConfig",
    "RateLimitingQueue",
    "Reconciler",
    "Request",
    "Result",
    "RunnableFunc",
    "TerminalError",
    "new_controller_managed_by",
    "operator_main",
    "start_operator",
]
