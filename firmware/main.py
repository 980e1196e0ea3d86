from sporadic import runtime
runtime.main()
