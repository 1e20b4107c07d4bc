print("dmp")
