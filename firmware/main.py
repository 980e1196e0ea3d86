from sporadic import boot
boot.main()
