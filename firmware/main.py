from sporadic.device import boot
boot.main()
