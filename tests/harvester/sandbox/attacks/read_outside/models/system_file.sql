-- attack: read a system file that every Linux host has
select * from read_csv('/etc/passwd', header = false, delim = ':')
