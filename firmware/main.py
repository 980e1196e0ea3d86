from sporadic import store
store.open_store()   # recovery first, in the emptiest heap (docs/device.md#memory)
from sporadic import runtime
runtime.main()
