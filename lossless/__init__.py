"""``lossless``: the clock-agnostic behaviour of lossless Ethernet, shared by the lab switch,
the probe NICs and (next) a discrete-event twin.

Switch side: ingress accounting with XOFF/XON and headroom, the PFC pause timer in 512-bit
quanta and its honouring (:mod:`lossless.pfc`); per-class egress queues and strict / ETS
scheduling (:mod:`lossless.queues`); WRED/ECN marking (:mod:`lossless.wred`); the PFC
watchdog (:mod:`lossless.watchdog`); their parameters (:mod:`lossless.config`).  NIC side:
the DCQCN reaction and notification points (:mod:`lossless.dcqcn`) and a sender's PFC
honouring (:class:`lossless.pfc.PauseHonouring`).

Every rule takes the time as an argument; only :mod:`lossless.clock` reads a real clock
(:class:`~lossless.clock.WallClock`), for the callers that run the model on wall time.  This
package imports only the standard library -- never ``agent``, ``lab`` or
``exporters`` -- so that all of them may import it.
"""

# Before any compiled module of the package is imported: source or compiled (the module says).
import lossless.compiled  # noqa: F401 -- imported for its effect: the compiled-or-source decision
