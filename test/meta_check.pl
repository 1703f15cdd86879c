#!/usr/bin/perl
#
# Check META.json, pg_tenure's PGXN metadata, against the parts of the PGXN
# Meta Spec 1.0.0 (https://pgxn.org/spec/) that a mistake is likely to break,
# and against the tree: the version is the control file's default_version
# and the provided install script exists.  PGXN's own validator
# (PGXN::Meta::Validator) is not packaged in Debian; this needs only Perl's
# core modules.
#
#   perl test/meta_check.pl [source directory]
#
# Prints every problem found and exits non-zero if there was any.
use strict;
use warnings;
use JSON::PP;

my $dir = shift // '.';
my @errors;
sub problem { push @errors, join('', @_) }

sub read_file
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "meta_check: cannot open $path: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

my $meta = eval { JSON::PP->new->utf8->decode(read_file("$dir/META.json")) };
die "meta_check: META.json is not valid JSON: $@" unless defined $meta;
die "meta_check: META.json is not a JSON object\n" unless ref $meta eq 'HASH';

# value types of the spec
my $semver = qr/^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+)?$/;
my $range_item = qr/^\s*(?:(?:==|!=|>=|<=|>|<)\s*)?(?:0|(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-[0-9A-Za-z-]+)?)\s*$/;
sub is_string { defined $_[0] && !ref $_[0] && length $_[0] > 0 }
sub is_term { is_string($_[0]) && length $_[0] >= 2 && $_[0] !~ m{[\s/\\\x00-\x1f]} }
sub is_tag { is_string($_[0]) && length $_[0] <= 255 && $_[0] !~ m{[/\\\x00-\x1f]} }
sub is_url { is_string($_[0]) && $_[0] =~ m{^(https?|git|mailto):} }
sub is_range { is_string($_[0]) && !grep { $_ !~ $range_item } split /,/, $_[0] }

my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1
  artistic_2 bsd freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0
  mit mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0 ssleay sun
  zlib restricted unrestricted open_source unknown);

# required keys
for my $key (qw(name abstract version maintainer license provides meta-spec))
{
	problem("missing required key \"$key\"") unless exists $meta->{$key};
}
# every other key must be one the spec defines, or a custom x_ key
my %known = map { $_ => 1 } qw(name abstract version maintainer license
  provides meta-spec description generated_by tags no_index prereqs
  release_status resources);
for my $key (sort keys %$meta)
{
	problem("unknown key \"$key\" (custom keys begin with x_)")
	  unless $known{$key} || $key =~ /^[xX]_/;
}

problem('"name" must be a term (two characters or more, no space or slash)')
  unless is_term($meta->{name});
problem('"abstract" must be a non-empty string') unless is_string($meta->{abstract});
problem('"description" must be a non-empty string')
  if exists $meta->{description} && !is_string($meta->{description});
problem("\"version\" must be a semantic version (major.minor.patch)")
  unless is_string($meta->{version}) && $meta->{version} =~ $semver;

my $m = $meta->{maintainer};
problem('"maintainer" must be a string or a list of strings')
  unless is_string($m) || (ref $m eq 'ARRAY' && @$m && !grep { !is_string($_) } @$m);

my $l = $meta->{license};
if (ref $l eq 'HASH')
{
	problem('"license" map values must be URLs') if !%$l || grep { !is_url($_) } values %$l;
}
else
{
	my @names = ref $l eq 'ARRAY' ? @$l : ($l);
	problem("\"license\" has unknown license \"" . ($_ // '') . "\"")
	  for grep { !defined $_ || ref $_ || !$licenses{$_} } @names;
}

my $spec = $meta->{'meta-spec'};
if (ref $spec ne 'HASH')
{
	problem('"meta-spec" must be an object');
}
else
{
	problem('"meta-spec"."version" must be "1.0.0"')
	  unless ($spec->{version} // '') eq '1.0.0';
	problem('"meta-spec"."url" must be a URL')
	  if exists $spec->{url} && !is_url($spec->{url});
}

my $provides = $meta->{provides};
if (ref $provides ne 'HASH' || !%$provides)
{
	problem('"provides" must be an object naming at least one extension');
	$provides = {};
}
for my $ext (sort keys %$provides)
{
	my $p = $provides->{$ext};
	problem("\"provides\" key \"$ext\" must be a term") unless is_term($ext);
	if (ref $p ne 'HASH')
	{
		problem("\"provides\".\"$ext\" must be an object");
		next;
	}
	problem("\"provides\".\"$ext\".\"file\" is missing") unless is_string($p->{file});
	problem("\"provides\".\"$ext\".\"file\" names $p->{file}, which does not exist")
	  if is_string($p->{file}) && !-f "$dir/$p->{file}";
	problem("\"provides\".\"$ext\".\"version\" must be a semantic version")
	  unless is_string($p->{version}) && $p->{version} =~ $semver;
	for my $opt (qw(abstract docfile))
	{
		problem("\"provides\".\"$ext\".\"$opt\" must be a non-empty string")
		  if exists $p->{$opt} && !is_string($p->{$opt});
	}
	problem("\"provides\".\"$ext\".\"docfile\" names $p->{docfile}, which does not exist")
	  if is_string($p->{docfile}) && !-f "$dir/$p->{docfile}";
	for my $key (sort keys %$p)
	{
		problem("\"provides\".\"$ext\" has unknown key \"$key\"")
		  unless $key =~ /^(file|version|abstract|docfile|[xX]_.*)$/;
	}
}

if (exists $meta->{prereqs})
{
	my $prereqs = $meta->{prereqs};
	if (ref $prereqs ne 'HASH')
	{
		problem('"prereqs" must be an object');
		$prereqs = {};
	}
	for my $phase (sort keys %$prereqs)
	{
		problem("\"prereqs\" has unknown phase \"$phase\"")
		  unless $phase =~ /^(configure|build|runtime|test|develop|[xX]_.*)$/;
		my $rels = $prereqs->{$phase};
		if (ref $rels ne 'HASH')
		{
			problem("\"prereqs\".\"$phase\" must be an object");
			next;
		}
		for my $rel (sort keys %$rels)
		{
			problem("\"prereqs\".\"$phase\" has unknown relationship \"$rel\"")
			  unless $rel =~ /^(requires|recommends|suggests|conflicts|[xX]_.*)$/;
			my $deps = $rels->{$rel};
			if (ref $deps ne 'HASH')
			{
				problem("\"prereqs\".\"$phase\".\"$rel\" must be an object");
				next;
			}
			for my $dep (sort keys %$deps)
			{
				problem("prerequisite \"$dep\" must be a term") unless is_term($dep);
				problem("prerequisite \"$dep\" has an invalid version range \"$deps->{$dep}\"")
				  unless is_range($deps->{$dep});
			}
		}
	}
}
my $pg = $meta->{prereqs}{runtime}{requires}{PostgreSQL}
  if ref $meta->{prereqs} eq 'HASH' && ref $meta->{prereqs}{runtime} eq 'HASH'
  && ref $meta->{prereqs}{runtime}{requires} eq 'HASH';
problem('"prereqs"."runtime"."requires" must name PostgreSQL 15.0.0, the oldest supported')
  unless defined $pg && $pg =~ /^\s*(>=\s*)?15\.0\.0\s*$/;

problem('"release_status" must be stable, testing or unstable')
  if exists $meta->{release_status}
  && ($meta->{release_status} // '') !~ /^(stable|testing|unstable)$/;
if (exists $meta->{tags})
{
	problem('"tags" must be a list of tags (at most 255 characters, no slash)')
	  unless ref $meta->{tags} eq 'ARRAY' && !grep { !is_tag($_) } @{ $meta->{tags} };
}
if (exists $meta->{resources})
{
	my $r = $meta->{resources};
	if (ref $r ne 'HASH')
	{
		problem('"resources" must be an object');
	}
	else
	{
		problem('"resources"."homepage" must be a URL')
		  if exists $r->{homepage} && !is_url($r->{homepage});
		for my $key (qw(bugtracker repository))
		{
			next unless exists $r->{$key};
			if (ref $r->{$key} ne 'HASH')
			{
				problem("\"resources\".\"$key\" must be an object");
				next;
			}
			for my $sub (qw(web url mailto))
			{
				problem("\"resources\".\"$key\".\"$sub\" must be a URL or address")
				  if exists $r->{$key}{$sub} && !is_string($r->{$key}{$sub});
			}
		}
	}
}

# agreement with the tree: the control file's default_version is the
# version (PGXN wants three parts: '0.1' is 0.1.0), and the provided file is
# that version's install script
my $control = read_file("$dir/pg_tenure.control");
my ($default) = $control =~ /^\s*default_version\s*=\s*'([^']*)'/m;
if (!defined $default)
{
	problem('pg_tenure.control has no default_version');
}
else
{
	my @parts = split /\./, $default;
	push @parts, 0 while @parts < 3;
	my $want = join '.', @parts;
	problem("\"version\" is \"$meta->{version}\" but pg_tenure.control's default_version '$default' means $want")
	  unless ($meta->{version} // '') eq $want;
	my $p = $provides->{pg_tenure};
	if (ref $p ne 'HASH')
	{
		problem('"provides" does not name pg_tenure');
	}
	else
	{
		problem("\"provides\".\"pg_tenure\".\"version\" must equal \"version\"")
		  unless ($p->{version} // '') eq ($meta->{version} // '');
		problem("\"provides\".\"pg_tenure\".\"file\" must be pg_tenure--$default.sql")
		  unless ($p->{file} // '') eq "pg_tenure--$default.sql";
	}
	problem('"name" must be pg_tenure') unless ($meta->{name} // '') eq 'pg_tenure';
}

if (@errors)
{
	print STDERR "META.json: $_\n" for @errors;
	exit 1;
}
print "META.json: ok (pg_tenure $meta->{version})\n";
